"""`GET /api/audit`: the audit log (django-auditlog's entries), for staff. Who did what and
when: teams and policies changed, memberships, tokens made and revoked, sign-ins, budgets
lifted, approvals answered. Newest first, a page at a time as the other lists are."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from auditlog.models import LogEntry
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.doors.api.pagination import LinkedCursorPagination, paginated_response
from agent.doors.api.schema import AUTH_ERRORS, BAD_CURSOR, INVALID

ACTIONS = {
    LogEntry.Action.CREATE: "create",
    LogEntry.Action.UPDATE: "update",
    LogEntry.Action.DELETE: "delete",
    LogEntry.Action.ACCESS: "access",
}


class AuditQueryIn(serializers.Serializer):
    actor = serializers.CharField(
        required=False, max_length=150, help_text="Only what this username did."
    )
    object = serializers.CharField(
        required=False,
        max_length=100,
        help_text="Only entries about this kind of object, by its model's name: team, user, "
        "apitoken, personalpolicy, userbudget, approval.",
    )
    since = serializers.CharField(
        required=False,
        max_length=40,
        help_text="Only entries from this time on: an ISO 8601 date and time (UTC unless it "
        "says), or a date.",
    )

    def validate_since(self, value: str) -> datetime:
        try:
            moment = parse_datetime(value)
        except ValueError:
            moment = None
        if moment is None:
            try:
                day = parse_date(value)
            except ValueError:
                day = None
            if day is None:
                raise serializers.ValidationError(
                    "give an ISO 8601 date and time, such as 2025-01-31T09:00:00Z"
                )
            moment = datetime.combine(day, time.min)
        return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


class AuditObjectOut(serializers.Serializer):
    type = serializers.CharField(help_text="The model's name: team, user, apitoken, …")
    id = serializers.CharField(help_text="Its primary key.")
    repr = serializers.CharField(help_text="How it read when the entry was made.")


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {
            "type": "array",
            "items": {"nullable": True},
            "minItems": 2,
            "maxItems": 2,
        },
    }
)
class ChangesField(serializers.Field):
    """{field: [old, new]}. Of a list of related objects (a person's groups, a team's
    admins, MCP servers and skills): [taken off, put on]."""

    def to_representation(self, entry: LogEntry) -> dict[str, list[Any]]:
        changes: dict[str, Any] = {}
        for field, value in (entry.changes_dict or {}).items():
            if isinstance(value, dict) and value.get("type") == "m2m":
                objects = list(value.get("objects") or [])
                added = value.get("operation") == "add"
                changes[field] = [[], objects] if added else [objects, []]
            elif isinstance(value, list | tuple) and len(value) == 2:
                changes[field] = list(value)
            else:
                changes[field] = [None, value]
        return changes


class AuditEntryOut(serializers.Serializer):
    id = serializers.IntegerField()
    when = serializers.DateTimeField(source="timestamp")
    actor = serializers.SerializerMethodField(help_text="Who did it; null: the site itself.")
    action = serializers.SerializerMethodField()
    object = serializers.SerializerMethodField()
    changes = ChangesField(source="*")
    remote_addr = serializers.IPAddressField(allow_null=True)

    def get_actor(self, entry: LogEntry) -> str | None:
        return None if entry.actor is None else entry.actor.get_username()

    @extend_schema_field(serializers.ChoiceField(choices=list(ACTIONS.values())))
    def get_action(self, entry: LogEntry) -> str:
        return ACTIONS.get(entry.action, str(entry.action))

    @extend_schema_field(AuditObjectOut)
    def get_object(self, entry: LogEntry) -> dict[str, str]:
        return {
            "type": entry.content_type.model,
            "id": str(entry.object_pk),
            "repr": entry.object_repr,
        }


def audit_entries(*, actor: str = "", kind: str = "", since: datetime | None = None) -> QuerySet:
    entries = LogEntry.objects.select_related("actor", "content_type")
    if actor:
        entries = entries.filter(actor__username=actor)
    if kind:
        # `teams_app.team` or `team`: the model's name is what a person knows it by.
        entries = entries.filter(content_type__model=kind.rsplit(".", 1)[-1].lower())
    if since is not None:
        entries = entries.filter(timestamp__gte=since)
    return entries


class Audit(APIView):
    permission_classes = [IsAdminUser]
    pages = LinkedCursorPagination

    @extend_schema(
        operation_id="audit_list",
        parameters=[
            AuditQueryIn,
            *pages.query_parameters(),
            OpenApiParameter(
                "Link",
                OpenApiTypes.STR,
                location=OpenApiParameter.HEADER,
                response=[200],
                description='`<url>; rel="next"` to older entries, `<url>; rel="prev"` to '
                "newer ones; absent at either end.",
            ),
        ],
        responses={200: AuditEntryOut(many=True), **INVALID, **AUTH_ERRORS, **BAD_CURSOR},
        description="The audit log, for staff (anyone else gets 403): who did what and when, "
        "newest first. Each entry names its actor (null: the site itself, such as a sign-in "
        "sync), the action, the object and each field's old and new value.",
    )
    def get(self, request: Request) -> Response:
        query = AuditQueryIn(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        found = query.validated_data
        entries = audit_entries(
            actor=found.get("actor", ""), kind=found.get("object", ""), since=found.get("since")
        )
        return paginated_response(
            pagination=self.pages(),
            serializer_class=AuditEntryOut,
            queryset=entries,
            request=request,
            view=self,
        )
