"""`/api/cron-jobs`: your scheduled jobs. Each runs `message` as a turn of the agent on its
schedule (`every` so many seconds, a five-field `cron` expression in its time zone, or once
`at` a time) and delivers the answer to the session `session` names.

A job the agent scheduled carries the limits of the turn that did it: `tools` and
`approve_tools`, which its runs keep to. They are read-only here, and a request that would
change them is refused rather than quietly ignored. They record what a person allowed that
turn (a task limited to some tools, a chat where some tool waits for their yes), and an
edit of the job's message or timing must not undo them on the way. They hold the agent to
the person's word, not the person: one who wants a job without them makes one here, which
carries nothing, in the open; staff may change them in the admin."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.known_fields import AS_READ, KnownFieldsOnly, NoFields
from agent.doors.api.pagination import LinkedCursorPagination, paginated_response
from agent.doors.api.schema import AUTH_ERRORS, BAD_CURSOR, INVALID, NOT_FOUND
from agent.doors.api.serializers import SESSION_KEY, StrictCharField, service_errors_as_invalid
from agent.turn import MAX_MESSAGE_CHARS, InvalidInput, validate_content
from cron_app import selectors, services, timing
from cron_app.models import CronJob

# The carried limits, as a job made through the API has them: a new job's body may name
# them only with these values, as an existing job's only with its own (`known_fields`).
CARRIED: dict[str, Any] = {"tools": None, "approve_tools": []}


class CronJobOut(serializers.ModelSerializer):
    tools = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        read_only=True,
        help_text="The only tools its runs may use: those the agent's turn that scheduled it "
        "was limited to (a task's `tools`); null, every tool. Read-only.",
    )
    approve_tools = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Tools that waited for your yes in the agent's turn that scheduled it "
        "(its chat's, its skills'): its runs, with no one to ask, refuse them, as they "
        "refuse those that wait in the chat `session` names. Read-only.",
    )
    # Declared: a read-only field made from the model's choices would leave out the blank.
    last_status = serializers.ChoiceField(
        choices=CronJob.Status.choices,
        allow_blank=True,
        read_only=True,
        help_text="How the last run ended; empty until the job first ran.",
    )

    class Meta:
        model = CronJob
        fields = [
            "id",
            "name",
            "message",
            "session",
            "kind",
            "every_seconds",
            "cron_expr",
            "tz",
            "at",
            "enabled",
            "tools",
            "approve_tools",
            "last_run",
            "last_status",
            "last_error",
            "next_run",
            "created",
            "updated",
        ]
        read_only_fields = fields


class LocalDateTimeField(serializers.DateTimeField):
    """A time without an offset is kept naive here, to be read in the job's own zone."""

    def enforce_timezone(self, value: datetime) -> datetime:
        return value if timezone.is_naive(value) else super().enforce_timezone(value)


class CronJobIn(KnownFieldsOnly):
    name = StrictCharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="Without one, the start of the message.",
    )
    message = StrictCharField(
        max_length=MAX_MESSAGE_CHARS,
        trim_whitespace=False,
        help_text="What the agent is asked each time the job runs.",
    )
    session = serializers.RegexField(
        SESSION_KEY,
        max_length=255,
        help_text="The session that receives each answer: `web:<chat id>` or `api:<chat id>`, "
        "one of yours or a new one.",
    )
    kind = serializers.ChoiceField(choices=CronJob.Kind.choices)
    every_seconds = serializers.IntegerField(
        min_value=timing.MIN_EVERY_SECONDS,
        max_value=timing.MAX_EVERY_SECONDS,
        required=False,
        allow_null=True,
        help_text="For kind `every`: the interval.",
    )
    cron_expr = StrictCharField(
        max_length=120,
        required=False,
        allow_blank=True,
        help_text="For kind `cron`: minute hour day-of-month month day-of-week, "
        "e.g. `0 9 * * 1-5`.",
    )
    tz = StrictCharField(
        max_length=64,
        required=False,
        help_text="IANA time zone of `cron_expr` and of an `at` without an offset; "
        "a new job's is UTC if not given.",
    )
    at = LocalDateTimeField(
        required=False,
        allow_null=True,
        help_text="For kind `at`: when to run, in the future; without an offset, a time in `tz`.",
    )
    enabled = serializers.BooleanField(required=False)

    def validate_message(self, value: str) -> str:
        # The same rules as a message typed into the chat.
        try:
            return validate_content(value, field="message")
        except InvalidInput as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        at = attrs.get("at")
        if at is not None and timezone.is_naive(at):
            # As the agent's own cron tool reads it: in the zone the job is given or has.
            tz = attrs.get("tz") or getattr(self.instance, "tz", None) or "UTC"
            try:
                attrs["at"] = timezone.make_aware(at, timing.zone(tz))
                attrs["at"].astimezone(UTC)  # what the database will store
            except DjangoValidationError as exc:
                raise serializers.ValidationError(exc.message_dict) from None
            except OverflowError:
                raise serializers.ValidationError({"at": ["is out of range"]}) from None
        return attrs


def _job(request: Request, job_id: int) -> CronJob:
    job = selectors.find_job(job_id=job_id, owner=request.user)
    if job is None:
        raise Http404("no such cron job")
    return job


def _save(request: Request, job: CronJob | None, fields: dict[str, Any]) -> CronJob:
    """Create (`job` None) or change a job through the services; their ValidationError
    becomes a 400 naming each field."""
    with service_errors_as_invalid():
        if job is None:
            return services.create_job(owner_id=request.user.pk, **fields)
        return services.update_job(job=job, **fields)


class CronJobList(APIView):
    # Not `pagination_class`: the schema would wrap the list in an envelope it does not have.
    pages = LinkedCursorPagination

    @extend_schema(
        parameters=pages.query_parameters(),
        responses={200: CronJobOut(many=True), **AUTH_ERRORS, **BAD_CURSOR},
        description="Your cron jobs, newest first, a page at a time; the `Link` header's "
        '`rel="next"` leads to older ones.',
    )
    def get(self, request: Request) -> Response:
        return paginated_response(
            pagination=self.pages(),
            serializer_class=CronJobOut,
            queryset=selectors.jobs_of(owner=request.user),
            request=request,
            view=self,
        )

    @extend_schema(
        request=CronJobIn,
        responses={201: CronJobOut, **INVALID, **AUTH_ERRORS},
        description="A new job, planned at once if `enabled` (the default).",
    )
    def post(self, request: Request) -> Response:
        data = CronJobIn(data=request.data, context={AS_READ: CARRIED})
        data.is_valid(raise_exception=True)
        job = _save(request, None, dict(data.validated_data))
        return Response(CronJobOut(job).data, status=201)


class CronJobDetail(APIView):
    @extend_schema(responses={200: CronJobOut, **AUTH_ERRORS, **NOT_FOUND})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(CronJobOut(_job(request, job_id)).data)

    @extend_schema(
        request=CronJobIn,
        responses={200: CronJobOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="Change the fields given. A change of the timing or of `enabled` plans "
        "the next run afresh; disabling clears `next_run`, enabling plans it again.",
    )
    def patch(self, request: Request, job_id: int) -> Response:
        return self._update(request, job_id, partial=True)

    @extend_schema(
        request=CronJobIn,
        responses={200: CronJobOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="As PATCH, with `message`, `session` and `kind` required.",
    )
    def put(self, request: Request, job_id: int) -> Response:
        return self._update(request, job_id, partial=False)

    @extend_schema(responses={204: None, **AUTH_ERRORS, **NOT_FOUND})
    def delete(self, request: Request, job_id: int) -> Response:
        services.delete_job(job=_job(request, job_id))
        return Response(status=204)

    def _update(self, request: Request, job_id: int, *, partial: bool) -> Response:
        job = _job(request, job_id)
        as_read = CronJobOut(job).data
        data = CronJobIn(job, data=request.data, partial=partial, context={AS_READ: as_read})
        data.is_valid(raise_exception=True)
        return Response(CronJobOut(_save(request, job, dict(data.validated_data))).data)


class CronJobRun(APIView):
    @extend_schema(
        request=None,
        responses={202: CronJobOut, **INVALID, **AUTH_ERRORS, **NOT_FOUND},
        description="Run the job once now, outside its schedule, which stays as it is; a "
        "disabled job runs too. The answer goes to its session as a scheduled run's does; "
        "`last_run` and `last_status` show it once it finished.",
    )
    def post(self, request: Request, job_id: int) -> Response:
        job = _job(request, job_id)
        NoFields(data=request.data).is_valid(raise_exception=True)
        services.run_now(job=job)
        return Response(CronJobOut(job).data, status=202)
