"""A stream of the OpenAI door ends with `data: [DONE]` whatever fails on its way, an error
in OpenAI's shape first; the turn itself goes on and is saved."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.conf import agent_settings
from agent.doors.openai.chat_request import read_chat_request
from agent.doors.openai.chat_turn import ChatTurn, turn_options
from agent.doors.openai.progress import Progress
from agent.doors.openai.shapes import Reply
from agent.events import Event, ToolCallEvent
from agent.turn import get_or_create_session
from tests.conftest import off_the_loop
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("agent_settings")
async def test_a_stream_that_breaks_midway_says_so_and_ends_with_done(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = Progress.deltas

    def breaks_at_a_tool_call(self: Progress, event: Event) -> list[dict[str, Any]]:
        if isinstance(event, ToolCallEvent):
            raise RuntimeError("a step this door could not show")
        return shown(self, event)

    monkeypatch.setattr(Progress, "deltas", breaks_at_a_tool_call)
    llm.tool_call("list_dir", {"path": "."}, text="Looking.").reply("Nothing there.")
    body = {"model": "agentsite", "messages": [{"role": "user", "content": "look"}]}
    chat = read_chat_request({**body, "stream": True}, session_header=None, conf=agent_settings())

    def user() -> Any:
        from django.contrib.auth.models import User

        return User.objects.create_user("ada")

    ada = off_the_loop(user)
    session = await get_or_create_session(key="openai:broken", owner=ada)
    turn = ChatTurn(chat, Reply(model=chat.model), turn_options(chat), user=ada, session=session)
    await turn.started()
    raw = b"".join([part async for part in turn.stream()])

    events = [line for line in raw.decode().split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2][len("data: ") :])["error"]
    assert (error["type"], error["code"]) == ("server_error", "internal_error")
    assert error["message"].startswith("Sorry, something went wrong on our side (reference ")

    # The turn went on without the stream, and finished.
    await turn.task

    def saved() -> list[str]:
        from sessions_app.models import Message

        return [m.content for m in Message.objects.filter(session=session).order_by("seq")]

    assert off_the_loop(saved)[-1] == "Nothing there."
