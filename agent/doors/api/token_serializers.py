"""What `/api/tokens` takes and shows: a token's name, dates and prefix, never its digest;
its secret once, in the answer that made it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from agent.doors.api.known_fields import KnownFieldsOnly
from teams_app.models import ApiToken

# Ten years: past it an expiry is "never" by another name.
MAX_DAYS = 3650


class TokenOut(serializers.ModelSerializer):
    expired = serializers.SerializerMethodField(
        help_text="Whether it is past its expiry: every door refuses it."
    )

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created", "expires", "last_used", "expired"]
        extra_kwargs = {
            "prefix": {"help_text": "The secret's first characters, to tell tokens apart."},
            "expires": {"help_text": "When it stops working; null: never."},
            "last_used": {
                "help_text": "When a door last let it in (to within a minute); null: never."
            },
        }

    def get_expired(self, token: ApiToken) -> bool:
        return token.expired()


class TokenCreatedOut(serializers.ModelSerializer):
    token = serializers.CharField(
        help_text="The secret: shown this once, kept only as a digest. Send it as "
        "`Authorization: Token <secret>` or `Bearer <secret>`, or `?token=` to a chat socket."
    )

    class Meta:
        model = ApiToken
        fields = ["id", "name", "token", "expires", "created"]


class TokenIn(KnownFieldsOnly):
    name = serializers.CharField(max_length=100, help_text="What it is for, to tell it apart.")
    expires = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="When it stops working, in the future; null or left out: never.",
    )
    expires_in_days = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_DAYS,
        help_text="Or: how many days from now it stops working.",
    )

    def validate_expires(self, value: datetime | None) -> datetime | None:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("An expiry must be in the future.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        days = attrs.pop("expires_in_days", None)
        if days is not None:
            if attrs.get("expires") is not None:
                raise serializers.ValidationError(
                    {"expires_in_days": ["Give `expires` or `expires_in_days`, not both."]}
                )
            attrs["expires"] = timezone.now() + timedelta(days=days)
        return attrs
