from __future__ import annotations

from rest_framework import serializers

from sessions_app.models import Message, Session


class SessionOut(serializers.ModelSerializer):
    class Meta:
        model = Session
        fields = ["key", "channel", "chat_id", "title", "model", "created", "updated"]


class SessionUpdateIn(serializers.Serializer):
    title = serializers.CharField(max_length=200, allow_blank=True, required=False)


class MessageOut(serializers.ModelSerializer):
    class Meta:
        model = Message
        fields = [
            "id",
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "name",
            "reasoning_content",
            "usage",
            "created",
        ]
