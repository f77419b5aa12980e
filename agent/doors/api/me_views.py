"""`/api/me`: who you are, your teams, and what your policy lets you do, each part with where
it came from (the site's settings, your own policy, or a team's)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.schema import AUTH_ERRORS
from teams_app.policy import effective_policy


class Me(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, **AUTH_ERRORS})
    def get(self, request: Request) -> Response:
        user = request.user
        policy = effective_policy(user)
        return Response(
            {
                "user": {
                    "id": user.pk,
                    "username": user.get_username(),
                    "name": user.get_full_name(),  # type: ignore[union-attr]
                    "email": getattr(user, "email", ""),
                    "is_staff": user.is_staff,
                    "is_superuser": user.is_superuser,
                },
                "teams": [
                    {"slug": team.slug, "name": team.name, "admin": team.admin}
                    for team in policy.teams
                ],
                "policy": policy.as_json(),
            }
        )
