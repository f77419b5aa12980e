"""Tools of the user's own (AGENT_TOOLS), the per-turn tool context, and delivery."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agent.conf import agent_settings
from agent.events import Collector
from agent.turn import SessionRef, run_turn
from agent.turn.toolbox import tool_problems, tool_registry
from sessions_app.models import Message, Session
from tests import custom_tools
from tests.conftest import run_manage
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


def tool_output(key: str) -> str:
    return Message.objects.get(session__key=key, role="tool").content


async def test_a_tool_named_in_agent_tools_is_offered_and_runs_in_its_turn(
    llm: ScriptedLLM, settings: Any
) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.WhoAmI"]
    llm.tool_call("whoami", {})
    llm.reply("Done.")

    result = await run_turn("cli:direct", "who am I?", channel="cli")

    assert result.success
    assert "whoami" in offered(llm.requests[0])
    assert {"read_file", "exec"} <= set(offered(llm.requests[0]))  # beside the built-in ones
    seen = json.loads(await sync_to_async(tool_output)("cli:direct"))
    assert seen == {"session": "cli:direct", "channel": "cli", "run": result.run_id, "owner": None}


async def test_the_registry_is_made_once_not_per_turn(llm: ScriptedLLM, settings: Any) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.WhoAmI"]
    llm.reply("one")
    llm.reply("two")
    made = custom_tools.made

    await run_turn("cli:direct", "first", channel="cli")
    registry = tool_registry(agent_settings())
    await run_turn("cli:direct", "second", channel="cli")

    assert tool_registry(agent_settings()) is registry
    assert custom_tools.made - made <= 1


async def test_concurrent_turns_each_see_their_own_context(
    llm: ScriptedLLM, settings: Any, ada: Any
) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.WhoAmI"]
    # Both turns are inside the tool at once: the first waits until the second has begun.
    llm.tool_call("whoami", {"wait": 0.5})
    llm.tool_call("whoami", {"wait": 0})
    llm.reply("a")
    llm.reply("b")

    first, second = await asyncio.gather(
        run_turn(SessionRef("web:one", owner=ada), "who?", channel="web"),
        run_turn("cli:two", "who?", channel="cli"),
    )

    one = json.loads(await sync_to_async(tool_output)("web:one"))
    two = json.loads(await sync_to_async(tool_output)("cli:two"))
    assert one == {"session": "web:one", "channel": "web", "run": first.run_id, "owner": ada.pk}
    assert two == {"session": "cli:two", "channel": "cli", "run": second.run_id, "owner": None}


async def test_delivery_to_the_turn_itself_is_an_event_of_the_turn(
    llm: ScriptedLLM, settings: Any
) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.make_announce"]
    llm.tool_call("announce", {"text": "halfway there"})
    llm.reply("Done.")
    events = Collector()

    result = await run_turn("cli:direct", "go", channel="cli", emit=events)

    messages = [e.to_dict() for e in events.of_type("message")]
    assert {"type": "message", "role": "assistant", "content": "halfway there",
            "run_id": result.run_id} in messages  # fmt: skip
    # The tool call and its result are the record; no message slips in between them.
    roles = await sync_to_async(
        lambda: [m.role for m in Message.objects.filter(session__key="cli:direct")]
    )()
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_delivery_to_another_conversation_saves_it_there_for_the_same_owner(
    llm: ScriptedLLM, settings: Any, ada: Any
) -> None:
    settings.AGENT_TOOLS = ["tests.custom_tools.Announce"]
    # Delivered only to a conversation that exists (`agent.turn.delivery.reachable`).
    await sync_to_async(Session.objects.create)(
        key="web:news", channel="web", chat_id="news", owner=ada
    )
    llm.tool_call("announce", {"text": "the build is green", "to": "web:news"})
    llm.reply("Told them.")

    await run_turn(SessionRef("web:work", owner=ada), "tell news", channel="web")

    @sync_to_async
    def delivered() -> list[tuple[str, str]]:
        target = Session.objects.get(key="web:news")
        assert target.owner_id == ada.pk
        return [(m.role, m.content) for m in target.messages.all()]

    assert await delivered() == [("assistant", "the build is green")]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("tests.custom_tools.Missing", "cannot be imported"),
        ("tests.custom_tools.not_a_tool", "is not a Tool"),
        ("no_such_module.Tool", "cannot be imported"),
    ],
)
def test_a_bad_agent_tools_entry_says_which_and_why(settings: Any, path: str, words: str) -> None:
    settings.AGENT_TOOLS = [path, "tests.custom_tools.WhoAmI"]
    [problem] = tool_problems(agent_settings())
    assert path in problem and words in problem
    # A process that started anyway serves without it, rather than failing every turn.
    registry = tool_registry(agent_settings())
    assert "whoami" in registry and "read_file" in registry


def test_a_bad_agent_tools_entry_stops_the_server_at_start_up(site_env: dict[str, str]) -> None:
    env = {**site_env, "AGENT_TOOLS": "tests.custom_tools.not_a_tool"}
    done = run_manage(env, "serve", "--port", "1")
    assert done.returncode != 0
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: AGENT_TOOLS: 'tests.custom_tools.not_a_tool' is not a Tool")


def test_agent_tools_from_the_environment_reach_the_command_line(
    site_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.tool_call("whoami", {})
    llm.reply("You are in cli:direct.")
    env = {**site_env, "AGENT_TOOLS": "tests.custom_tools.WhoAmI"}

    done = run_manage(env, "agent", "-m", "who am I?")

    assert done.returncode == 0, done.stderr
    assert "whoami" in done.stderr  # the tool hint
    assert "You are in cli:direct." in done.stdout
    assert "whoami" in offered(llm.requests[0])
