"""`GET /api/search`: a user's chats searched by title and by the words of their messages, on
SQLite (every word somewhere in the text) and on PostgreSQL (full-text, through its index)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from sessions_app.models import Message, Run, Session

pytestmark = pytest.mark.django_db


def make_session(key: str, owner: User | None, title: str = "") -> Session:
    channel, _, chat_id = key.partition(":")
    return Session.objects.create(
        key=key, channel=channel, chat_id=chat_id or channel, owner=owner, title=title
    )


def say(session: Session, role: str, content: str, **fields: Any) -> Message:
    return Message.objects.create(session=session, role=role, content=content, **fields)


def found(api: APIClient, q: str, **params: Any) -> list[dict[str, Any]]:
    answer = api.get("/api/search", {"q": q, **params})
    assert answer.status_code == 200, answer.content
    return list(answer.json())


def test_finds_the_words_of_my_messages_in_every_chat_the_page_lists(
    api: APIClient, ada: User
) -> None:
    web = make_session("web:w1", ada, "Travel plans")
    api_session = make_session("api:a1", ada)
    openai = make_session("openai:o1", ada)
    asked = say(web, "user", "How do I renew a Portuguese passport quickly?")
    replied = say(api_session, "assistant", "The passport office in Lisbon opens at nine.")
    client = say(openai, "user", "Is my PASSPORT still valid in Lisbon?")
    say(web, "assistant", "Nothing to do with it.")

    hits = found(api, "passport")
    assert {hit["message_id"] for hit in hits} == {asked.pk, replied.pk, client.pk}
    by_id = {hit["message_id"]: hit for hit in hits}
    assert by_id[asked.pk] == {
        "session": "web:w1",
        "title": "Travel plans",
        "message_id": asked.pk,
        "run_id": None,
        "role": "user",
        "snippet": "How do I renew a Portuguese passport quickly?",
        "created": by_id[asked.pk]["created"],
        "archived": False,
    }
    assert by_id[replied.pk]["session"] == "api:a1" and by_id[replied.pk]["role"] == "assistant"
    # Every word must be there, each as the start of a word at least.
    assert [hit["message_id"] for hit in found(api, "passport lisb")] in (
        [replied.pk, client.pk],
        [client.pk, replied.pk],
    )
    assert found(api, "passport paris") == []


def test_a_title_that_matches_comes_first_without_a_message(api: APIClient, ada: User) -> None:
    session = make_session("web:t1", ada, "Kubernetes upgrade notes")
    other = make_session("web:t2", ada, "Lunch")
    message = say(other, "user", "what did we decide about the kubernetes cluster?")
    hits = found(api, "Kubernetes")
    assert [(hit["session"], hit["message_id"]) for hit in hits] == [
        ("web:t1", None),
        ("web:t2", message.pk),
    ]
    assert hits[0]["snippet"] == "Kubernetes upgrade notes" and hits[0]["role"] is None
    assert session.title == hits[0]["title"]


def test_only_my_own_chats_and_only_what_the_chat_shows(api: APIClient, ada: User) -> None:
    bob = User.objects.create_user("bob")
    mine = make_session("web:mine", ada)
    wanted = say(mine, "user", "the zeppelin question")
    say(make_session("web:bobs", bob, "zeppelin"), "user", "zeppelin facts")
    # Sessions the page does not list: the command line's, a cron job's, a sub-agent's.
    say(make_session("cli:direct", ada), "user", "zeppelin from the terminal")
    say(make_session("cron:7", ada), "assistant", "zeppelin on a schedule")
    say(make_session("subagent:abc", ada), "assistant", "zeppelin by a sub-agent")
    # Tool output and a sub-agent's report to the agent are not anyone's words in the chat.
    say(mine, "tool", "zeppelin.txt", tool_call_id="c1", name="list_dir")
    report = Run.objects.create(session=mine, channel="system", prompt="report")
    say(mine, "user", "[sub-agent] zeppelin research finished", run=report)

    assert [hit["message_id"] for hit in found(api, "zeppelin")] == [wanted.pk]


def test_archived_messages_are_left_out_unless_asked_for_and_then_marked(
    api: APIClient, ada: User
) -> None:
    session = make_session("web:arch", ada)
    old = say(session, "user", "an obsolete marmalade recipe", archived=True)
    live = say(session, "user", "the marmalade recipe now")
    assert [hit["message_id"] for hit in found(api, "marmalade")] == [live.pk]
    hits = {hit["message_id"]: hit["archived"] for hit in found(api, "marmalade", archived="true")}
    assert hits == {old.pk: True, live.pk: False}


def test_a_long_message_gives_the_text_around_the_word(api: APIClient, ada: User) -> None:
    session = make_session("web:long", ada)
    text = "word " * 200 + "the unusual ocelot appears here " + "filler " * 200
    say(session, "assistant", text)
    [hit] = found(api, "ocelot")
    assert "the unusual ocelot appears here" in hit["snippet"]
    assert hit["snippet"].startswith("…") and hit["snippet"].endswith("…")
    assert len(hit["snippet"]) <= 170


def test_limit(api: APIClient, ada: User) -> None:
    session = make_session("web:many", ada)
    made = [say(session, "user", f"quokka number {n}") for n in range(30)]
    assert len(found(api, "quokka")) == 20
    hits = found(api, "quokka", limit=5)
    assert len(hits) == 5
    if connection.vendor != "postgresql":  # equal ranks: the newest first on either
        assert [hit["message_id"] for hit in hits] == [m.pk for m in reversed(made)][:5]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "?!…"}, "q"),
        ({"q": "x" * 201}, "q"),
        ({"q": "fine", "limit": "0"}, "limit"),
        ({"q": "fine", "limit": "51"}, "limit"),
        ({"q": "fine", "limit": "many"}, "limit"),
        ({"q": "fine", "archived": "perhaps"}, "archived"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    api: APIClient, params: dict[str, str], field: str
) -> None:
    answer = api.get("/api/search", params)
    assert answer.status_code == 400, answer.content
    assert list(answer.json()) == [field]
    assert answer.json()[field][0]


def test_needs_a_login(db: None) -> None:
    assert APIClient().get("/api/search", {"q": "x"}).status_code in (401, 403)


def test_the_schema_documents_it(api: APIClient) -> None:
    schema = api.get("/api/schema", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/search"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"q", "limit", "archived"}
    assert {"200", "400"} <= set(operation["responses"])


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="the GIN index exists on PostgreSQL only (.ci/run's second pass runs this)",
)
def test_on_postgresql_the_words_are_found_through_the_gin_index(api: APIClient, ada: User) -> None:
    from sessions_app.search import _full_text

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'message_words_gin'")
        [(definition,)] = cursor.fetchall()
    assert "gin" in definition and "to_tsvector" in definition
    session = make_session("web:pg", ada)
    say(session, "user", "a capybara")
    messages = _full_text(Message.objects.filter(role__in=["user", "assistant"]), ["capy"])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = messages.query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "message_words_gin" in plan, plan
    assert [hit["snippet"] for hit in found(api, "capy")] == ["a capybara"]


def test_a_members_search_finds_their_teams_chats_and_no_other_teams(
    api: APIClient, ada: User
) -> None:
    from sessions_app.services import create_team_chat
    from teams_app.services import create_team, set_members

    ops, sales = create_team(slug="ops"), create_team(slug="sales")
    set_members(team=ops, users=[ada])
    ours = create_team_chat(team=ops.group, title="Pump outage")
    wanted = say(ours, "user", "the zeppelin pump")
    say(create_team_chat(team=sales.group), "user", "zeppelin leads")

    assert [hit["message_id"] for hit in found(api, "zeppelin")] == [wanted.pk]
    assert [hit["session"] for hit in found(api, "outage")] == [ours.key]
