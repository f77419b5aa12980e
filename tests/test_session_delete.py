"""Deleting a chat while its turn writes: the turn's messages go with the chat, or the turn
finds it gone; the delete never fails. On PostgreSQL a message committed between Django's
look at what to delete and its delete of the chat failed the delete with a foreign key
violation (the API's DELETE answered 500, the admin's a server error)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test import Client
from django.urls import reverse

from sessions_app import services
from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db(transaction=True)


def test_staff_delete_chats_in_the_admin_one_and_several_at_once(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `delete_session`, each locked first, as the API's DELETE does."""
    through: list[str] = []
    delete_session = services.delete_session

    def noted(*, session: Session) -> None:
        through.append(session.key)
        delete_session(session=session)

    monkeypatch.setattr(services, "delete_session", noted)
    sessions = [services.get_or_create_session(key=f"web:s{n}", owner=None) for n in range(3)]
    for session in sessions:
        Message.objects.create(session=session, role="user", content="hello")

    several = admin_client.post(
        reverse("admin:sessions_app_session_changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [s.pk for s in sessions[:2]],
            "post": "yes",
        },
    )
    one = admin_client.post(
        reverse("admin:sessions_app_session_delete", args=[sessions[2].pk]), {"post": "yes"}
    )

    assert (several.status_code, one.status_code) == (302, 302)
    assert sorted(through) == ["web:s0", "web:s1", "web:s2"]
    assert not Session.objects.exists() and not Message.objects.exists()


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite has one writer at a time: the delete waits for the whole write, and the "
    "race is PostgreSQL's (the second CI pass runs this on it)",
)
def test_a_chat_deleted_while_a_turn_writes_to_it_is_deleted_whole() -> None:
    session = services.get_or_create_session(key="web:busy", owner=None)
    writing, deleted = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def a_turns_write() -> None:
        # As `add_messages` writes: the chat's row locked, a message added, and a moment
        # before the commit, in which the delete starts.
        try:
            with transaction.atomic():
                services._lock_session(session)
                Message.objects.create(session=session, role="assistant", content="late")
                writing.set()
                time.sleep(0.5)
        finally:
            connections.close_all()

    def delete() -> None:
        writing.wait(10)
        try:
            services.delete_session(session=Session.objects.get(pk=session.pk))
        except BaseException as exc:
            failures.append(exc)
        finally:
            deleted.set()
            connections.close_all()

    threads = [threading.Thread(target=a_turns_write), threading.Thread(target=delete)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)

    assert deleted.is_set() and failures == []
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Message.objects.filter(session_id=session.pk).exists()
