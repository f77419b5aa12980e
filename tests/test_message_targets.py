"""Where the `message` tool may deliver: only to conversations of the turn's user that exist
and that a person can open (their web, api and openai chats, the command line's). A key no
door opens, a cron job's or the heartbeat's own session, or a chat that does not exist is
refused in a sentence the model can act on, and no conversation is made for it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from agent.turn import SessionRef, run_turn
from sessions_app.models import Message, Session
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def tool_answer(llm: ScriptedLLM) -> str:
    """What the message tool answered the model, as the model's next call carries it."""
    answers = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    return str(answers[-1]["content"])


def keys_of(owner: User | None) -> set[str]:
    return set(Session.objects.filter(owner=owner).values_list("key", flat=True))


def said_in(key: str, owner: User | None) -> list[str]:
    found = Message.objects.filter(session__key=key, session__owner=owner)
    return list(found.values_list("content", flat=True))


async def send(llm: ScriptedLLM, owner: User | None, channel: str, chat_id: str) -> str:
    llm.tool_call("message", {"content": "hello there", "channel": channel, "chat_id": chat_id})
    llm.reply("Done.")
    result = await run_turn(SessionRef("web:here", owner), "tell them", channel="web")
    assert result.success
    return tool_answer(llm)


@pytest.mark.parametrize(
    ("channel", "chat_id"),
    [("evil", "x"), ("cron", "1"), ("heartbeat", "heartbeat"), ("subagent", "x"), ("Web", "x")],
)
async def test_a_key_no_door_opens_is_refused_and_nothing_is_made(
    llm: ScriptedLLM, ada: User, channel: str, chat_id: str
) -> None:
    answer = await send(llm, ada, channel, chat_id)

    assert answer.startswith("Error: "), answer
    assert f"{channel}:{chat_id}" not in await sync_to_async(keys_of)(ada)
    assert await sync_to_async(keys_of)(ada) == {"web:here"}


async def test_a_cron_jobs_own_session_is_refused_even_when_it_exists(
    llm: ScriptedLLM, ada: User
) -> None:
    # A job's session holds the history its next run reads: words put there would come back
    # as the agent's own.
    await sync_to_async(Session.objects.create)(
        key="cron:1", channel="cron", chat_id="1", owner=ada
    )

    answer = await send(llm, ada, "cron", "1")

    assert answer.startswith("Error: cron:1 is not a conversation a person can open"), answer
    assert await sync_to_async(said_in)("cron:1", ada) == []


@pytest.mark.parametrize(("channel", "chat_id"), [("web", "nope"), ("api", "nope"), ("cli", "x")])
async def test_a_conversation_that_does_not_exist_is_refused_and_not_made(
    llm: ScriptedLLM, ada: User, channel: str, chat_id: str
) -> None:
    answer = await send(llm, ada, channel, chat_id)

    assert answer == (
        f"Error: the user has no conversation {channel}:{chat_id}; messages go only to "
        "conversations that exist (leave out channel and chat_id to answer this one)"
    )
    assert await sync_to_async(keys_of)(ada) == {"web:here"}


async def test_another_users_chat_of_that_key_is_not_reached(llm: ScriptedLLM, ada: User) -> None:
    grace = await sync_to_async(User.objects.create_user)("grace", password="pw")
    await sync_to_async(Session.objects.create)(
        key="web:news", channel="web", chat_id="news", owner=grace
    )

    answer = await send(llm, ada, "web", "news")

    assert answer.startswith("Error: the user has no conversation web:news"), answer
    assert await sync_to_async(said_in)("web:news", grace) == []
    assert await sync_to_async(keys_of)(ada) == {"web:here"}


@pytest.mark.parametrize("key", ["web:other", "api:task", "openai:client", "cli:direct"])
async def test_the_users_own_existing_conversations_are_reached(
    llm: ScriptedLLM, ada: User, key: str
) -> None:
    channel, chat_id = key.split(":")
    await sync_to_async(Session.objects.create)(
        key=key, channel=channel, chat_id=chat_id, owner=ada
    )

    answer = await send(llm, ada, channel, chat_id)

    assert answer == f"Message sent to {key}."
    assert await sync_to_async(said_in)(key, ada) == ["hello there"]


async def test_without_an_account_the_command_lines_own_sessions_are_reached(
    llm: ScriptedLLM,
) -> None:
    await sync_to_async(Session.objects.create)(key="cli:other", channel="cli", chat_id="other")

    assert await send(llm, None, "cli", "other") == "Message sent to cli:other."
    assert await sync_to_async(said_in)("cli:other", None) == ["hello there"]
    assert await send(llm, None, "cron", "7") == (
        "Error: cron:7 is not a conversation a person can open; messages go to this "
        "conversation (leave out channel and chat_id) or to another of the user's own web, "
        "api, openai, team, cli conversations"
    )


async def test_a_member_messages_their_teams_chat_and_not_another_teams(
    llm: ScriptedLLM,
) -> None:
    from django.contrib.auth.models import User

    from sessions_app.services import create_team_chat
    from teams_app.services import create_team, set_members

    def teams_and_chats() -> tuple[User, str, str]:
        ada = User.objects.create_user("ada")
        ops, sales = create_team(slug="ops"), create_team(slug="sales")
        set_members(team=ops, users=[ada])
        ours = create_team_chat(team=ops.group).key
        theirs = create_team_chat(team=sales.group).key
        return ada, ours, theirs

    ada, ours, theirs = await sync_to_async(teams_and_chats)()
    channel, chat_id = ours.split(":")
    assert await send(llm, ada, channel, chat_id) == f"Message sent to {ours}."
    channel, chat_id = theirs.split(":")
    assert (await send(llm, ada, channel, chat_id)).startswith(
        f"Error: the user has no conversation {theirs}"
    )
