"""The REST endpoints about the site itself: its health (open to all), the models a user may
pick, and the tools the agent offers."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.conf import agent_settings
from agent.doors.api.schema import AUTH_ERRORS
from agent.doors.api.serializers import HealthOut, ModelsOut, ToolOut
from agent.turn import known_tool_names, offered_tools, settings_for


class Health(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(responses=HealthOut)
    def get(self, request: Request) -> Response:
        model = agent_settings().model or None
        # Tools of MCP servers not yet connected are left out: a health check never connects.
        names = known_tool_names(agent_settings())
        return Response({"status": "ok", "model": model, "tools": names})


class Models(APIView):
    @extend_schema(
        responses={200: ModelsOut, **AUTH_ERRORS},
        description="The model ids you may pick (`model` of a task, `/model` in a chat): "
        "AGENT_MODEL, the default, and AGENT_MODELS. Any other id is refused with a 400.",
    )
    def get(self, request: Request) -> Response:
        # Yours: the operator's, narrowed by your teams' policy.
        conf = settings_for(request.user)
        return Response(ModelsOut({"default": conf.model or None, "models": conf.models}).data)


class Tools(APIView):
    @extend_schema(responses={200: ToolOut(many=True), **AUTH_ERRORS})
    def get(self, request: Request) -> Response:
        # Yours: those your teams' policy gives your agent.
        registry = async_to_sync(offered_tools)(settings_for(request.user))
        tools = [definition["function"] for definition in registry.definitions()]
        return Response(ToolOut(tools, many=True).data)
