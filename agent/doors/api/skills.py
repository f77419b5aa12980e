"""`/api/skills`: the skills kept in the database. Everyone signed in reads them; only staff
change them, since a skill's text reaches every user's agent."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.schema import AUTH_ERRORS, INVALID, NOT_FOUND
from skills_app import selectors, services
from skills_app.models import Skill


class StaffWrites(BasePermission):
    message = "Only staff may change skills: their text reaches every user's agent."

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.method in SAFE_METHODS or bool(request.user and request.user.is_staff)


class SkillOut(serializers.ModelSerializer):
    class Meta:
        model = Skill
        fields = ["name", "description", "content", "always", "enabled", "created", "updated"]


class SkillIn(serializers.ModelSerializer):
    class Meta:
        model = Skill
        fields = ["name", "description", "content", "always", "enabled"]


def _skill(name: str) -> Skill:
    skill = selectors.find_skill(name=name)
    if skill is None:
        raise Http404("no such skill")
    return skill


class SkillList(APIView):
    permission_classes = [IsAuthenticated, StaffWrites]

    @extend_schema(responses={200: SkillOut(many=True), **AUTH_ERRORS})
    def get(self, request: Request) -> Response:
        return Response(SkillOut(selectors.list_skills(), many=True).data)

    @extend_schema(request=SkillIn, responses={201: SkillOut, **INVALID, **AUTH_ERRORS})
    def post(self, request: Request) -> Response:
        data = SkillIn(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(SkillOut(services.create_skill(**data.validated_data)).data, status=201)


class SkillDetail(APIView):
    permission_classes = [IsAuthenticated, StaffWrites]

    @extend_schema(responses={200: SkillOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        return Response(SkillOut(_skill(name)).data)

    @extend_schema(
        request=SkillIn, responses={200: SkillOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND}
    )
    def put(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=False)

    @extend_schema(
        request=SkillIn, responses={200: SkillOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND}
    )
    def patch(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=True)

    @extend_schema(responses={204: None, **AUTH_ERRORS, **NOT_FOUND})
    def delete(self, request: Request, name: str) -> Response:
        services.delete_skill(skill=_skill(name))
        return Response(status=204)

    def _update(self, request: Request, name: str, *, partial: bool) -> Response:
        skill = _skill(name)
        data = SkillIn(skill, data=request.data, partial=partial)
        data.is_valid(raise_exception=True)
        return Response(SkillOut(services.update_skill(skill=skill, **data.validated_data)).data)
