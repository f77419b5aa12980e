"""`/api/approvals`: the tools that wait for your yes before they run, and the calls that
wait for it now.

Which tools wait: the operator's (`AGENT_APPROVE_TOOLS`), those the skills your prompt
offers name, yours (changed here) and each session's (`PATCH /api/sessions/<key>`), less
those a session was told "always" for. The calls that wait are answered through their
task (`POST /api/tasks/<id>/approve`) or the chat's socket: yours, and in your teams'
chats those of the turns you started, and every one of a team you administer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.conf import agent_settings
from agent.doors.api.known_fields import AS_READ, KnownFieldsOnly
from agent.doors.api.prompt_file_views import FolderUnusable, own_folder
from agent.doors.api.schema import AUTH_ERRORS, INVALID
from agent.doors.api.serializers import AuthorOut, ToolPatternsField
from sessions_app import approvals
from sessions_app.models import Approval
from sessions_app.people import person
from skills_app import selectors as skill_selectors
from teams_app.models import Team


class AnswerableByOut(serializers.Serializer):
    author = AuthorOut(allow_null=True, help_text="The member who sent the message.")
    team_admins = serializers.BooleanField(help_text="The team's admins may answer too.")


class WaitingCallOut(serializers.Serializer):
    id = serializers.CharField(source="call_id", help_text="The tool call's id.")
    task = serializers.UUIDField(source="run_id", help_text="The task (run) that waits.")
    session = serializers.CharField(source="run.session.key")
    name = serializers.CharField()
    arguments = serializers.JSONField()
    created = serializers.DateTimeField()
    deadline = serializers.DateTimeField(help_text="When it counts as declined, unanswered.")
    answerable_by = serializers.SerializerMethodField(
        help_text="In a team chat, who may answer: the member who sent the message and the "
        "team's admins; null in a chat of your own."
    )

    @extend_schema_field(AnswerableByOut(allow_null=True))
    def get_answerable_by(self, approval: Approval) -> dict[str, Any] | None:
        run = approval.run
        if run.session.team_id is None:
            return None
        author = person(run.author) if run.author is not None else None
        return {"author": author, "team_admins": True}


class ApprovalsOut(serializers.Serializer):
    approve_tools = serializers.ListField(
        child=serializers.CharField(), help_text="Yours: they wait in all your sessions."
    )
    operator = serializers.ListField(
        child=serializers.CharField(), help_text="AGENT_APPROVE_TOOLS, for everyone."
    )
    skills = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="What each skill your prompt offers adds, by its name.",
    )
    pending = WaitingCallOut(
        many=True,
        help_text="The calls that wait for your answer now: in your chats, and in your teams' "
        "chats those you may answer.",
    )


class ApprovalsIn(KnownFieldsOnly):
    approve_tools = ToolPatternsField(
        help_text='Tool names or globs that wait for your yes, e.g. ["exec", "mcp_*"].'
    )


class Approvals(APIView):
    @extend_schema(responses={200: ApprovalsOut, **AUTH_ERRORS})
    def get(self, request: Request) -> Response:
        return Response(ApprovalsOut(self._state(request)).data)

    @extend_schema(request=ApprovalsIn, responses={200: ApprovalsOut, **INVALID, **AUTH_ERRORS})
    def put(self, request: Request) -> Response:
        # What GET shows may be sent back whole; only `approve_tools` is yours to change.
        shown = ApprovalsOut(self._state(request)).data
        data = ApprovalsIn(data=request.data, context={AS_READ: shown})
        data.is_valid(raise_exception=True)
        approvals.set_user_approve_tools(
            user=request.user, tools=data.validated_data["approve_tools"]
        )
        return Response(ApprovalsOut(self._state(request)).data)

    @extend_schema(request=ApprovalsIn, responses={200: ApprovalsOut, **INVALID, **AUTH_ERRORS})
    def patch(self, request: Request) -> Response:
        return self.put(request)

    def _state(self, request: Request) -> dict[str, Any]:
        conf = agent_settings()
        try:
            folder = own_folder(request.user)
        except FolderUnusable:
            folder = None  # your own skills are left out, as your prompt leaves them
        offered = skill_selectors.offered_skills(
            workspace=conf.workspace, environment=conf.exec_env, folder=folder
        )
        return {
            "approve_tools": approvals.user_approve_tools(user_id=request.user.pk),
            "operator": list(conf.approve_tools),
            "skills": {
                skill.name: list(skill.approve_tools) for skill in offered if skill.approve_tools
            },
            "pending": approvals.pending_approvals(
                owner=request.user,
                admin_of=list(
                    Team.objects.filter(admins=request.user).values_list("group_id", flat=True)
                ),
            ),
        }
