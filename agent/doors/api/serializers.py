from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from agent import tool_patterns
from agent.conf import AgentSettings, agent_settings
from agent.context import compose_prompt
from agent.doors.api.known_fields import KnownFieldsOnly
from agent.turn import (
    MAX_MESSAGE_CHARS,
    InvalidInput,
    allowed_model,
    refused_tools,
    run_trace,
    unknown_tools,
    validate_content,
)
from sessions_app import approvals, keys
from sessions_app.models import Message, Run, Session
from sessions_app.people import person
from sessions_app.usage import run_usage, session_usage


class UsageOut(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost = serializers.FloatField(
        allow_null=True,
        help_text="USD; null when a run counted here used a model with no known price "
        "(litellm's table or AGENT_MODEL_PRICES).",
    )
    priced_cost = serializers.FloatField(help_text="USD, of the runs whose price is known.")
    unpriced_runs = serializers.IntegerField(
        help_text="Runs that used tokens of a model with no known price."
    )


class SessionOut(serializers.ModelSerializer):
    approve_tools = serializers.ListField(
        child=serializers.CharField(),
        help_text="Tools that wait for your yes in this session, besides AGENT_APPROVE_TOOLS, "
        "yours (`/api/approvals`) and the skills'.",
    )
    allowed_tools = serializers.ListField(
        child=serializers.CharField(),
        help_text='Tools answered "always" in this session: they no longer wait here.',
    )

    usage = serializers.SerializerMethodField()
    team = serializers.SerializerMethodField()

    class Meta:
        model = Session
        fields = [
            "key",
            "channel",
            "chat_id",
            "team",
            "title",
            "model",
            "approve_tools",
            "allowed_tools",
            "created",
            "updated",
            "usage",
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_team(self, session: Session) -> str | None:
        """The slug of the team whose chat it is, which all its members share; null for
        your own."""
        return session.team.name if session.team_id is not None and session.team else None

    @extend_schema_field(UsageOut)
    def get_usage(self, session: Session) -> dict[str, Any]:
        """Summed over the session's runs; a list reads them all in one query, handed over
        as the context's `usage` (`sessions_app.usage.session_usage`)."""
        known = self.context.get("usage")
        if known is None:
            known = session_usage(session_ids=[session.pk])
        return known[session.pk]


class ToolPatternsField(serializers.ListField):
    """Tool names or globs (`exec`, `mcp_*`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(trim_whitespace=False), **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        problems = tool_patterns.problems(data)
        if problems:
            raise serializers.ValidationError(problems)
        return list(dict.fromkeys(super().to_internal_value(data)))


class SessionUpdateIn(KnownFieldsOnly):
    title = serializers.CharField(max_length=200, allow_blank=True, required=False)
    approve_tools = ToolPatternsField(
        required=False, help_text="The tools that wait for your yes in this session."
    )
    allowed_tools = ToolPatternsField(
        required=False,
        help_text='The tools answered "always" here, fewer of them: a tool is allowed '
        "by answering a call of it with `always`, never here.",
    )


class SessionCreateIn(KnownFieldsOnly):
    team = serializers.SlugField(
        required=False,
        help_text="The slug of one of your teams: the chat is the team's, and every member "
        "reads and writes it. Without it, a chat of your own.",
    )
    title = serializers.CharField(max_length=200, allow_blank=True, required=False)


class AuthorOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class MessageOut(serializers.ModelSerializer):
    author = serializers.SerializerMethodField()

    class Meta:
        model = Message
        fields = [
            "id",
            "role",
            "author",
            "content",
            "tool_calls",
            "tool_call_id",
            "name",
            "reasoning_content",
            "usage",
            "archived",
            "stopped",
            "created",
        ]
        extra_kwargs = {
            "archived": {"help_text": "Taken out of the conversation by `/new`, kept on record."},
            "stopped": {"help_text": "A reply cut short by /stop: the text said until then."},
        }

    @extend_schema_field(AuthorOut(allow_null=True))
    def get_author(self, message: Message) -> dict[str, Any] | None:
        """Who wrote a person's message (in a team chat, which member); null for the
        agent's messages and those of no one's run."""
        run = message.run
        if message.role != Message.Role.USER or run is None or run.author is None:
            return None
        if run.channel == "system":
            return None
        return person(run.author)


class MessagesQueryIn(serializers.Serializer):
    archived = serializers.BooleanField(
        required=False,
        help_text="`false`: only the live conversation; `true`: only what `/new` archived. "
        "Without it, both.",
    )


# The API continues its own sessions and the user's web chats, by the rule every door uses;
# the command line's, scheduled jobs' and the heartbeat's belong to no user.
SESSION_KEY = rf"^(?:{keys.SESSION_KEY_PATTERN})$"


class StrictCharField(serializers.CharField):
    """Text only: DRF's CharField would quietly turn 42 or true into a string."""

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@contextlib.contextmanager
def service_errors_as_invalid() -> Iterator[None]:
    """A service's Django ValidationError as DRF's, so that it becomes a 400 naming each
    field (or, for an error of no field, DRF's non-field key)."""
    try:
        yield
    except DjangoValidationError as exc:
        if hasattr(exc, "error_dict"):
            raise serializers.ValidationError(exc.message_dict) from None
        raise serializers.ValidationError(
            {api_settings.NON_FIELD_ERRORS_KEY: exc.messages}
        ) from None


TOOLS_SCHEMA = {
    "oneOf": [
        {"type": "boolean"},
        {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200}},
    ],
    "nullable": True,
}


@extend_schema_field(TOOLS_SCHEMA)
class ToolsField(serializers.Field):
    """`false`, `true` (or null: every tool, as without it) or a list of tool names."""

    default_error_messages = {
        "invalid": "Must be false (a direct generation), true, or a list of tool names.",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)

    def to_internal_value(self, data: object) -> bool | list[str] | None:
        if data is True:
            return None
        if data is False:
            return False
        items: list[object] = data if isinstance(data, list) else []
        names = [name for name in items if isinstance(name, str) and 0 < len(name) <= 200]
        if not isinstance(data, list) or len(names) != len(items):
            self.fail("invalid")
        return list(dict.fromkeys(names))

    def to_representation(self, value: object) -> object:
        return value


class TaskIn(KnownFieldsOnly):
    prompt = StrictCharField(max_length=MAX_MESSAGE_CHARS, trim_whitespace=False)
    context = StrictCharField(
        max_length=MAX_MESSAGE_CHARS, required=False, allow_blank=True, trim_whitespace=False
    )
    session = serializers.RegexField(
        SESSION_KEY,
        required=False,
        help_text="`api:<chat id>` or `web:<chat id>`, one of yours or a new one (each user "
        "has keys of their own); a new key starts a new session. A chat id is 1 to 190 of "
        "`A-Z a-z 0-9 _ . @ -`, and not `.` or `..`. The chat page opens `web:<id>` at "
        "`/c/<id>/` and `api:<id>` at `/c/api:<id>/`.",
    )
    model = StrictCharField(
        max_length=200,
        required=False,
        help_text="One of the ids `GET /api/models` lists (AGENT_MODEL and AGENT_MODELS); "
        "without it, the session's own choice or AGENT_MODEL.",
    )
    wait = serializers.BooleanField(default=True)
    tools = ToolsField(
        required=False,
        help_text="What the agent may use in this task: a list of tool names (`GET /api/tools`) "
        "for those alone, or `false` for a direct generation: the model alone, with no tools "
        "and no agent prompt, in one call. Without it, every tool.",
    )

    def _conf(self) -> AgentSettings:
        """The caller's settings (their teams' policy over the operator's), which the view
        passes; the operator's without it."""
        return self.context.get("conf") or agent_settings()

    def validate_tools(self, value: bool | list[str] | None) -> bool | list[str] | None:
        if isinstance(value, list):
            conf = self._conf()
            unknown = async_to_sync(unknown_tools)(value, conf)
            if unknown:
                raise serializers.ValidationError(
                    f"unknown tools: {', '.join(unknown)} (GET /api/tools lists the tools)"
                )
            refused = refused_tools(value, conf)
            if refused:
                raise serializers.ValidationError(refused)
        return value

    def validate_model(self, value: str) -> str:
        # Refused here, so that no run is recorded and no provider asked for another id.
        try:
            return allowed_model(value, self._conf())
        except InvalidInput as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_prompt(self, value: str) -> str:
        # The same rules as a message through the web chat or the command line.
        try:
            return validate_content(value, field="prompt")
        except InvalidInput as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if len(compose_prompt(attrs["prompt"], attrs.get("context"))) > MAX_MESSAGE_CHARS:
            raise serializers.ValidationError(
                {"context": [f"prompt and context together exceed {MAX_MESSAGE_CHARS} characters"]}
            )
        return attrs


class TokensOut(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class PendingCallOut(serializers.Serializer):
    id = serializers.CharField(source="call_id", help_text="The tool call's id.")
    name = serializers.CharField()
    arguments = serializers.JSONField()


class TraceStepOut(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["model", "tool"])
    name = serializers.CharField(help_text="The model id, or the tool's name.")
    started = serializers.DateTimeField()
    ms = serializers.IntegerField()
    error = serializers.CharField(
        allow_null=True, help_text="Why it failed; `stopped` for a call the turn was stopped in."
    )
    tokens = TokensOut(
        required=False, allow_null=True, help_text="Model calls: null when none were counted."
    )
    cost = serializers.FloatField(
        required=False, allow_null=True, help_text="Model calls: USD, null when unknown."
    )


class TaskOut(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=Run.Status.choices)
    success = serializers.BooleanField()
    session = serializers.CharField(source="session.key")
    tools_used = serializers.ListField(child=serializers.CharField())
    usage = serializers.SerializerMethodField()
    pending = serializers.SerializerMethodField(
        help_text="With status `waiting`: the tool calls that wait for your answer "
        "(`POST /api/tasks/{id}/approve`)."
    )
    trace = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "status",
            "success",
            "text",
            "error",
            "iterations",
            "session",
            "tools_used",
            "usage",
            "trace",
            "model",
            "tools",
            "pending",
            "created",
            "finished",
        ]
        extra_kwargs = {
            "tools": {
                "help_text": "What the task could use: null for every tool, the names it was "
                "limited to, or false for a direct generation."
            }
        }

    @extend_schema_field(PendingCallOut(many=True))
    def get_pending(self, run: Run) -> list[dict[str, Any]]:
        if run.status != Run.Status.WAITING:
            return []
        return list(PendingCallOut(approvals.pending_approvals(run_id=run.pk), many=True).data)

    @extend_schema_field(UsageOut)
    def get_usage(self, run: Run) -> dict[str, Any]:
        return run_usage(run)

    @extend_schema_field(TraceStepOut(many=True))
    def get_trace(self, run: Run) -> list[dict[str, Any]]:
        return run_trace(run)


class ApproveIn(KnownFieldsOnly):
    call_id = StrictCharField(max_length=128, help_text="The id of a call the task waits on.")
    allow = serializers.BooleanField(help_text="Whether the call may run.")
    always = serializers.BooleanField(
        default=False,
        help_text="With `allow`: the tool no longer waits in this task's session.",
    )
    wait = serializers.BooleanField(
        default=True,
        help_text="Once no call waits any more, go on with the task here and answer when it "
        "ends (or waits again); false: the worker goes on with it (202).",
    )


class ToolOut(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.DictField()


class HealthOut(serializers.Serializer):
    status = serializers.CharField()
    model = serializers.CharField(allow_null=True)
    tools = serializers.ListField(child=serializers.CharField())


class ModelsOut(serializers.Serializer):
    default = serializers.CharField(
        allow_null=True, help_text="AGENT_MODEL: what a session uses until it picks another."
    )
    models = serializers.ListField(
        child=serializers.CharField(),
        help_text="The ids a session, a task or `/model` may pick, the default first.",
    )
