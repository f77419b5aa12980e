"""A chat shared as a read-only snapshot: what it said when it was shared, for the teams and
people its owner named."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from sessions_app.models.sessions import Session

# 16 random bytes in URL-safe base64: a link no one guesses, short enough to paste.
SHARE_ID_BYTES = 16


def new_share_id() -> str:
    return secrets.token_urlsafe(SHARE_ID_BYTES)


class ChatShare(models.Model):
    """A snapshot of a personal chat, read-only, for the groups (teams) and people named.

    The snapshot is the chat's messages as its page shows them
    (`sessions_app.selectors.messages_for_display`), tool calls and results included: it is
    copied when the chat is shared, so it says what it said then whatever the chat says
    later, and it outlives the chat (`source` is then null).
    """

    id = models.CharField(primary_key=True, max_length=32, default=new_share_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_shares"
    )
    source = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="shares",
        help_text="The chat it was taken from; empty once that chat is deleted.",
    )
    title = models.CharField(max_length=200, blank=True)
    messages = models.JSONField(default=list, blank=True)
    teams = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="chat_shares",
        help_text="The teams (their groups) whose active members may read it.",
    )
    people = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="chats_shared_with",
        help_text="The people who may read it besides those teams.",
    )
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = "shared chat"

    def __str__(self) -> str:
        return self.title or f"chat shared by {self.owner_id}"
