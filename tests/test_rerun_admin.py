"""The admin shows what an edit or a regeneration archived: marked on the session's page, a
column and a filter of the message list."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from agent.turn import SessionRef, rerun_turn, run_turn
from sessions_app.models import Message, Session
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def test_archived_messages_are_marked_and_filtered(admin_client: Client, llm: ScriptedLLM) -> None:
    ada = User.objects.create_user("ada", password="pw")
    ref = SessionRef("web:admin-view", owner=ada)
    llm.reply("A first answer.")
    async_to_sync(run_turn)(ref, "a question", channel="web")
    llm.reply("A better answer.")
    async_to_sync(rerun_turn)(ref, channel="web")
    session = Session.objects.get(key="web:admin-view")
    old = Message.objects.get(content="A first answer.")
    assert old.archived

    page = admin_client.get(reverse("admin:sessions_app_session_change", args=[session.pk]))
    html = page.content.decode()
    assert "(archived) assistant: A first answer." in html
    assert "(archived) user: a question" in html
    assert "assistant: A better answer." in html
    assert "(archived) assistant: A better answer." not in html

    listing = reverse("admin:sessions_app_message_changelist")
    archived = admin_client.get(listing, {"archived__exact": "1"}).content.decode()
    assert "A first answer." in archived and "A better answer." not in archived
    live = admin_client.get(listing, {"archived__exact": "0"}).content.decode()
    assert "A better answer." in live and "A first answer." not in live
    assert "column-archived" in live
