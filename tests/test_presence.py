"""Presence's bookkeeping: each person once however many tabs, a goodbye heard, and a
viewer whose process died (no goodbye) taken off the list once it stops saying it is alive."""

from __future__ import annotations

from typing import Any

from agent.doors.presence import ALIVE, BYE, GONE_AFTER_SECONDS, HELLO, HERE, Presence

ADA = {"id": 1, "name": "Ada"}
BOB = {"id": 2, "name": "Bob"}


class Layer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        self.sent.append((channel, message))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sent.append((group, message))


async def test_a_viewer_who_stops_saying_it_is_alive_leaves_the_list() -> None:
    now = [0.0]
    frames: list[dict[str, Any]] = []

    async def send(frame: dict[str, Any]) -> None:
        frames.append(frame)

    layer = Layer()
    mine = Presence(layer, "session.1", "me", ADA, send, clock=lambda: now[0])
    await mine._show()
    await mine.heard({"type": HELLO, "channel": "bob-tab-1", "viewer": BOB})
    await mine.heard({"type": HERE, "channel": "bob-tab-2", "viewer": BOB})
    # The newcomer was answered, to its channel alone.
    assert ("bob-tab-1", {"type": HERE, "channel": "me", "viewer": ADA}) in layer.sent
    assert frames[-1] == {"type": "presence", "viewers": [ADA, BOB]}

    await mine.heard({"type": BYE, "channel": "bob-tab-1", "viewer": BOB})
    assert frames[-1]["viewers"] == [ADA, BOB]  # Bob still has a tab open

    now[0] = GONE_AFTER_SECONDS / 2
    await mine.heard({"type": ALIVE, "channel": "bob-tab-2", "viewer": BOB})
    now[0] = GONE_AFTER_SECONDS * 1.4
    await mine.prune()
    assert frames[-1]["viewers"] == [ADA, BOB]  # heard from lately
    now[0] = GONE_AFTER_SECONDS * 2
    await mine.prune()
    assert frames[-1] == {"type": "presence", "viewers": [ADA]}  # its process died
    assert [f["viewers"] for f in frames].count([ADA]) == 2  # only changes are sent
