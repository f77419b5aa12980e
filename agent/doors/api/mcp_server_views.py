"""`/api/mcp-servers`: the MCP servers whose tools every user's agent is offered, by name.
Everyone signed in reads them; only staff change them, since a stdio server is a command
the site runs. The values of `env` and `headers` are write-only: answers show each name
with `MASK`, and `MASK` sent back for a name keeps its stored value."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.known_fields import AS_READ, KnownFieldsOnly
from agent.doors.api.schema import AUTH_ERRORS, INVALID, NOT_FOUND
from agent.doors.api.serializers import StrictCharField, service_errors_as_invalid
from mcp_app import selectors, services
from mcp_app.masking import MASK, masked
from mcp_app.models import MAX_TOOL_TIMEOUT, NAME_PATTERN, McpServer


class StaffWrites(BasePermission):
    message = "Only staff may change MCP servers: a stdio server runs a command on the server."

    def has_permission(self, request: Request, view: Any) -> bool:
        # Every write, a delete and `trusted` among them. A rule of its own, not one shared
        # with another endpoint, so that loosening that one never opens this.
        return request.method in SAFE_METHODS or bool(request.user and request.user.is_staff)


class MaskedValues(serializers.DictField):
    """Names with their values masked, whatever is stored."""

    def to_representation(self, value: Any) -> dict[str, str]:
        shown = masked(value)
        return shown if isinstance(shown, dict) else {}


_WRITE_ONLY = (
    f"Each value is write-only: answers show `{MASK}` for it. Sending `{MASK}` back for a "
    "name keeps its stored value; a name left out is removed."
)


class McpServerOut(serializers.ModelSerializer):
    env = MaskedValues(
        child=serializers.CharField(),
        read_only=True,
        help_text=f"stdio: environment variables for the command, values shown as `{MASK}`.",
    )
    headers = MaskedValues(
        child=serializers.CharField(),
        read_only=True,
        help_text=f"http: headers sent with every request, values shown as `{MASK}`.",
    )
    args = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = McpServer
        fields = [
            "name",
            "transport",
            "command",
            "args",
            "env",
            "url",
            "headers",
            "enabled",
            "trusted",
            "tool_timeout",
            "created",
            "updated",
        ]
        read_only_fields = fields

    def to_representation(self, instance: McpServer) -> dict[str, Any]:
        shown = super().to_representation(instance)
        request = self.context.get("request")
        if not (request and request.user.is_staff):
            # Everyone may see which servers their agent uses, but arguments and a URL's
            # path, login and query often carry tokens: those are for staff.
            shown["args"] = [MASK for _ in shown["args"]]
            shown["url"] = _bare_url(shown["url"])
        return shown


def _bare_url(url: str) -> str:
    """`url` as scheme, host and port, with `MASK` for whatever followed them."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.hostname or ''}"
        origin += f":{parts.port}" if parts.port else ""
    except ValueError:
        return MASK
    rest = url.split("://", 1)[-1].partition("/")[2]
    return f"{origin}/{MASK}" if rest or parts.username or parts.password else origin


def _text(**kwargs: Any) -> StrictCharField:
    return StrictCharField(allow_blank=True, trim_whitespace=False, **kwargs)


class McpServerIn(KnownFieldsOnly):
    name = serializers.RegexField(
        NAME_PATTERN,
        max_length=32,
        help_text="Unique; its tools are offered to the model as `mcp_<name>_<tool>`.",
    )
    transport = serializers.ChoiceField(choices=McpServer.Transport.choices)
    command = _text(
        max_length=500,
        required=False,
        help_text="stdio: the program to start, e.g. `npx`. Required for stdio.",
    )
    args = serializers.ListField(
        child=_text(), required=False, help_text="stdio: the program's arguments."
    )
    env = serializers.DictField(
        child=_text(),
        required=False,
        help_text=f"stdio: environment variables for the program (the site's own are not "
        f"passed on). {_WRITE_ONLY}",
    )
    url = _text(
        max_length=2000,
        required=False,
        help_text="http: the endpoint's http:// or https:// URL. Required for http.",
    )
    headers = serializers.DictField(
        child=_text(),
        required=False,
        help_text=f"http: headers sent with every request. {_WRITE_ONLY}",
    )
    enabled = serializers.BooleanField(required=False)
    trusted = serializers.BooleanField(
        required=False,
        help_text="http: let the server reach loopback and private addresses. Off (the "
        "default), its connections pass the network guard that web_fetch's do: public "
        "internet addresses only. A stdio server is never marked trusted.",
    )
    tool_timeout = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TOOL_TIMEOUT,
        required=False,
        help_text="Seconds a tool call may take before the model is told it timed out.",
    )


def _server(name: str) -> McpServer:
    server = selectors.find_server(name=name)
    if server is None:
        raise Http404("no such MCP server")
    return server


def _save(server: McpServer | None, fields: dict[str, Any]) -> McpServer:
    """Create (`server` None) or change a server through the services; their
    ValidationError becomes a 400 naming each field."""
    with service_errors_as_invalid():
        if server is None:
            return services.create_server(**fields)
        return services.update_server(server=server, **fields)


class McpServerList(APIView):
    permission_classes = [IsAuthenticated, StaffWrites]

    @extend_schema(
        responses={200: McpServerOut(many=True), **AUTH_ERRORS},
        description="All MCP servers, by name.",
    )
    def get(self, request: Request) -> Response:
        return Response(
            McpServerOut(selectors.list_servers(), many=True, context={"request": request}).data
        )

    @extend_schema(
        request=McpServerIn,
        responses={201: McpServerOut, **INVALID, **AUTH_ERRORS},
        description="A new MCP server; staff only. Settings of the other transport are dropped.",
    )
    def post(self, request: Request) -> Response:
        data = McpServerIn(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(
            McpServerOut(_save(None, dict(data.validated_data)), context={"request": request}).data,
            status=201,
        )


class McpServerDetail(APIView):
    permission_classes = [IsAuthenticated, StaffWrites]

    @extend_schema(responses={200: McpServerOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        return Response(McpServerOut(_server(name), context={"request": request}).data)

    @extend_schema(
        request=McpServerIn,
        responses={200: McpServerOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="Change the fields given (a new `name` renames the server); staff only. "
        "An `env` or `headers` given replaces the old one whole; one not given stays.",
    )
    def patch(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=True)

    @extend_schema(
        request=McpServerIn,
        responses={200: McpServerOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="As PATCH, with `name` and `transport` required.",
    )
    def put(self, request: Request, name: str) -> Response:
        return self._update(request, name, partial=False)

    @extend_schema(responses={204: None, **AUTH_ERRORS, **NOT_FOUND})
    def delete(self, request: Request, name: str) -> Response:
        services.delete_server(server=_server(name))
        return Response(status=204)

    def _update(self, request: Request, name: str, *, partial: bool) -> Response:
        server = _server(name)
        as_read = McpServerOut(server, context={"request": request}).data
        data = McpServerIn(data=request.data, partial=partial, context={AS_READ: as_read})
        data.is_valid(raise_exception=True)
        return Response(
            McpServerOut(
                _save(server, dict(data.validated_data)), context={"request": request}
            ).data
        )
