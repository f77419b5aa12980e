"""A socket that opens while its process is behind with the channel layer's messages gets
none of what was published to its session before it joined, and all that came after."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer

from agent.doors import joining
from agent.events import MessageEvent
from agent.turn import fanout
from sessions_app.models import Session
from tests.ws import open_chat

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


class LaggingLayer(InMemoryChannelLayer):
    """channels-redis's publish/subscribe layer as a busy process meets it: a group's
    message reaches the channels in the group when the process reads it (`catch_up`),
    which may be well after it was published. `lost_marks` marks never arrive."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lagging = False
        self.unread: list[tuple[str, dict[str, Any]]] = []
        self.lost_marks: set[int] = set()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if message["type"] == joining.JOINED and message["mark"] in self.lost_marks:
            return
        if self.lagging:
            self.unread.append((group, message))
        else:
            await super().group_send(group, message)

    async def catch_up(self) -> None:
        self.lagging = False
        unread, self.unread = self.unread, []
        for group, message in unread:
            await super().group_send(group, message)


@pytest.fixture
def layer(settings: Any) -> LaggingLayer:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.LaggingLayer"}}
    lagging = get_channel_layer()
    assert isinstance(lagging, LaggingLayer)
    return lagging


async def publish(chat: str, text: str) -> None:
    session = await sync_to_async(Session.objects.get)(key=f"web:{chat}")
    await fanout.publish(session.pk, MessageEvent(role="assistant", content=text))


async def next_text(socket: Any) -> str:
    return str((await socket.receive_json_from(timeout=5))["content"])


async def test_what_was_published_before_a_socket_joined_does_not_reach_it(
    layer: LaggingLayer, token: str
) -> None:
    first, _ = await open_chat("lag", token)
    layer.lagging = True
    await publish("lag", "an old reply, which the history shows")
    second, _ = await open_chat("lag", token)
    await layer.catch_up()
    await publish("lag", "a new reply")

    assert await next_text(second) == "a new reply"
    # The socket that was there when both were published gets both.
    assert [await next_text(first), await next_text(first)] == [
        "an old reply, which the history shows",
        "a new reply",
    ]
    await first.disconnect()
    await second.disconnect()


async def test_a_lost_mark_holds_nothing_back_for_long(layer: LaggingLayer, token: str) -> None:
    # The first mark went out before the layer's subscription took effect.
    layer.lost_marks = {1}
    socket, _ = await open_chat("lost", token)
    await publish("lost", "a reply after it joined")
    assert await next_text(socket) == "a reply after it joined"
    await socket.disconnect()


async def test_a_layer_that_never_returns_a_mark_lets_the_frames_through_in_order(
    layer: LaggingLayer, token: str, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setattr(joining, "MARK_EVERY", 0.01)
    layer.lost_marks = set(range(1, joining.MARKS + 1))
    socket, _ = await open_chat("never", token)
    await publish("never", "one")
    await publish("never", "two")
    with caplog.at_level(logging.WARNING, logger="agent.doors.joining"):
        assert [await next_text(socket), await next_text(socket)] == ["one", "two"]
    assert "no mark came back" in caplog.text
    await socket.disconnect()
