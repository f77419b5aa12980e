"""The admin with a session of 10,000 messages: its page shows the newest, the message list
pages through the rest, and neither grows with the session."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import Message, Session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def big_session() -> Session:
    session = Session.objects.create(key="web:big", channel="web", chat_id="big")
    Message.objects.bulk_create(
        Message(session=session, role="user" if n % 2 == 0 else "assistant", content=f"m{n}")
        for n in range(10_000)
    )
    return session


@pytest.fixture
def admin_client(client: Any) -> Any:
    client.force_login(User.objects.create_superuser("boss", password="pw-boss-123"))
    return client


def test_the_session_page_shows_the_newest_messages_with_a_way_to_the_rest(
    admin_client: Any, big_session: Session
) -> None:
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(f"/admin/sessions_app/session/{big_session.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "m9999" in html and "m9980" in html and "m9979" not in html
    every = f"/admin/sessions_app/message/?session__id__exact={big_session.pk}"
    assert every in html
    assert len(queries) < 30

    listing = admin_client.get(every)
    assert listing.status_code == 200
    assert listing.content.decode().count("/admin/sessions_app/message/") < 200  # one page


def test_the_session_list_searches_keys_not_every_message(
    admin_client: Any, big_session: Session
) -> None:
    found = admin_client.get("/admin/sessions_app/session/", {"q": "web:big"})
    assert found.status_code == 200 and "web:big" in found.content.decode()
    assert (
        "web:big"
        not in admin_client.get("/admin/sessions_app/session/", {"q": "m9999"})
        .content.decode()
        .split("</thead>")[-1]
    )


def stored_session(key: str, count: int) -> None:
    session = Session.objects.create(key=key, channel="cli", chat_id=key.split(":")[1])
    Message.objects.bulk_create(
        Message(session=session, role="user" if n % 2 == 0 else "assistant", content=f"m{n}")
        for n in range(count)
    )


@pytest.mark.usefixtures("agent_settings")
def test_a_turn_costs_the_same_queries_after_ten_thousand_messages(llm: Any) -> None:
    from asgiref.sync import async_to_sync

    from agent.turn import run_turn

    def queries_of_a_turn(key: str) -> int:
        llm.reply("ok")
        # From this thread, the turn's database calls run here too, where they are counted.
        with CaptureQueriesContext(connection) as queries:
            assert async_to_sync(run_turn)(key, "hello", channel="cli").success
        return len(queries)

    stored_session("cli:short", 60)
    stored_session("cli:long", 10_000)
    queries_of_a_turn("cli:warm")  # first-use costs (schedules, caches) out of the way
    short, long = queries_of_a_turn("cli:short"), queries_of_a_turn("cli:long")
    assert long == short, (short, long)
