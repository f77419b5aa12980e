"""What the OpenAI door keeps of its clients' conversations: which session a conversation
continues (`ConversationMark`), and the answers of the Responses API, which a client may
read again or continue from (`StoredResponse`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions_app.models.sessions import Session


class ConversationMark(models.Model):
    """A conversation as a client sends it, up to an answer, by the digest of its messages:
    the next request that brings the same messages continues the same session."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=64)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "digest"], name="conversation_mark_per_owner")
        ]

    def __str__(self) -> str:
        return self.digest[:12]


class StoredResponse(models.Model):
    """One answer of the Responses API (`resp_…`), as the client got it."""

    id = models.CharField(max_length=64, primary_key=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    # The user's message its turn answered: the one a client's results continue.
    prompt = models.TextField()
    body = models.JSONField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id
