"""Fan-out through a channel layer that fails or is slow: events arrive late, never lost,
and in the order they were published."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from agent.events import MessageEvent
from agent.turn import fanout, session_group


class UnsteadyLayer(InMemoryChannelLayer):
    """An in-memory layer whose first sends fail, then are slow: Redis restarting, then
    busy."""

    def __init__(self, *, failures: int = 0, delay: float = 0.0) -> None:
        super().__init__()
        self.failures = failures
        self.delay = delay
        self.attempts = 0

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the layer is restarting")
        if self.delay:
            delay, self.delay = self.delay, 0.0
            await asyncio.sleep(delay)
        await super().group_send(group, message)


@pytest.fixture
def listening(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A layer of the given kind in place of the process's, and a socket's channel on
    session 7's group; yields the function that reads what the channel got."""

    async def listen(layer: UnsteadyLayer) -> Any:
        monkeypatch.setattr(fanout, "get_channel_layer", lambda: layer)
        monkeypatch.setattr(fanout, "RETRY_DELAYS", (0.01,))
        monkeypatch.setattr(fanout, "PUBLISH_WAIT", 0.05)
        channel = await layer.new_channel()
        await layer.group_add(session_group(7), channel)

        async def received(count: int) -> list[str]:
            messages = [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(count)]
            return [message["frame"]["content"] for message in messages]

        return received

    return listen


async def publish(content: str) -> None:
    await fanout.publish(7, MessageEvent(role="assistant", content=content))


async def test_a_layer_failing_for_a_moment_gets_the_events_once_it_is_back(
    listening: Any,
) -> None:
    layer = UnsteadyLayer(failures=3)
    received = await listening(layer)
    await publish("m0")
    await publish("m1")
    assert await received(2) == ["m0", "m1"]
    assert layer.attempts == 5


async def test_a_slow_send_holds_the_turn_up_briefly_and_still_arrives_first(
    listening: Any,
) -> None:
    layer = UnsteadyLayer(delay=0.5)
    received = await listening(layer)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await publish("slow")
    await publish("next")
    assert loop.time() - started < 0.4  # the turn went on meanwhile
    assert await received(2) == ["slow", "next"]


async def test_a_layer_that_never_comes_back_is_given_up_on(
    listening: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    layer = UnsteadyLayer(failures=1000)
    await listening(layer)
    monkeypatch.setattr(fanout, "GIVE_UP_AFTER", 0.1)
    await publish("lost")
    await asyncio.sleep(0.2)
    assert "gave up sending" in caplog.text


class SlowLayer(InMemoryChannelLayer):
    """An in-memory layer whose sends each take the next of `delays` (seconds)."""

    def __init__(self, *delays: float) -> None:
        super().__init__()
        self.delays = list(delays)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await asyncio.sleep(self.delays.pop(0))
        await super().group_send(group, message)


# Tasks spawned by the tests' work, held so that they are not collected while they run.
background: set[asyncio.Future[None]] = set()


async def publish_and_spawn() -> str:
    """Work that publishes, and spawns a task that publishes after it has returned."""

    async def later() -> None:
        await asyncio.sleep(0.1)
        await publish("spawned")

    await publish("own")
    # Its context a copy of this one's: it adds its send to `delivering`'s.
    spawned = asyncio.ensure_future(later())
    background.add(spawned)
    spawned.add_done_callback(background.discard)
    return "done"


async def test_a_send_added_while_a_task_ends_is_waited_for_too(
    listening: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    received = await listening(SlowLayer(0.2, 0.2))
    monkeypatch.setattr(fanout, "DRAIN_WAIT", 2.0)
    work = fanout.delivering(publish_and_spawn, what="the test's work")
    assert await work() == "done"
    assert await received(2) == ["own", "spawned"]
    assert "never reached" not in caplog.text


async def test_a_send_added_while_a_task_ends_that_never_finishes_is_counted_lost(
    listening: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    received = await listening(SlowLayer(0.2, 60.0))
    monkeypatch.setattr(fanout, "DRAIN_WAIT", 0.5)
    work = fanout.delivering(publish_and_spawn, what="the test's work")
    assert await work() == "done"
    assert await received(1) == ["own"]
    assert "the test's work: 1 event(s) never reached the sockets" in caplog.text
    assert "message for session 7" in caplog.text


@pytest.mark.skipif(
    not settings.REDIS_URL,
    reason="needs the Redis channel layer (REDIS_URL); .ci/run's second pass has it",
)
async def test_a_busy_web_process_gets_every_event_through_redis() -> None:
    """Hundreds of sockets of one process with events not yet read lose none of them (the
    list-based layer's shared inbox per process dropped all but a hundred)."""
    layer = get_channel_layer()
    sockets = [await layer.new_channel() for _ in range(300)]
    try:
        for number, channel in enumerate(sockets):
            await layer.group_add(f"inbox-test.{number}", channel)
        await until_subscribed(layer, "inbox-test.299", sockets[-1])
        for number in range(300):
            await layer.group_send(f"inbox-test.{number}", {"type": "session.event", "n": number})
        received = [await numbered(layer, channel) for channel in sockets]
        assert received == list(range(300))
    finally:
        for number, channel in enumerate(sockets):
            await layer.group_discard(f"inbox-test.{number}", channel)


async def until_subscribed(layer: Any, group: str, channel: str) -> None:
    """Until Redis has the last of the process's subscriptions (and with it every earlier
    one: they share a connection). A subscription takes effect a moment after `group_add`
    returns; a socket's history, read after it joins, covers that moment."""
    for _ in range(50):
        await layer.group_send(group, {"type": "probe"})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), 0.1)
            return
    raise AssertionError(f"{group} was never subscribed")


async def numbered(layer: Any, channel: str) -> int:
    """The number of the next message on `channel`, past any probe still arriving."""
    while "n" not in (message := await asyncio.wait_for(layer.receive(channel), 5)):
        assert message["type"] == "probe"
    return int(message["n"])
