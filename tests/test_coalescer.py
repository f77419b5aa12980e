"""Streamed chunks joined into frames: one after a quiet spell leaves at once, those close
behind it wait for the window, and a burst widens the next window until the stream slows."""

from __future__ import annotations

import asyncio
from typing import Any

from agent.events import StreamChunk
from agent.turn import ChunkCoalescer


def chunk(text: str) -> StreamChunk:
    return StreamChunk(msg_id="m1", content=text)


async def test_a_chunk_after_a_quiet_spell_leaves_at_once_and_its_followers_together() -> None:
    sent: list[dict[str, Any]] = []

    async def send(frame: dict[str, Any]) -> None:
        sent.append(frame)

    socket = ChunkCoalescer(send, window=0.05)
    await socket(chunk("a"))
    assert [f["content"] for f in sent] == ["a"]
    await socket(chunk("b"))
    await socket(chunk("c"))
    assert len(sent) == 1  # held for the window
    await asyncio.sleep(0.1)
    assert [f["content"] for f in sent] == ["a", "bc"]


async def test_a_burst_widens_the_next_window_and_a_slow_stream_narrows_it_again() -> None:
    async def send(frame: dict[str, Any]) -> None:
        pass

    socket = ChunkCoalescer(send, window=0.01, burst=0.05)
    await socket(chunk("first"))
    for n in range(6):
        await socket(chunk(str(n)))
    await socket.flush()
    assert socket.gap == 0.05  # six chunks in one frame: a burst
    await asyncio.sleep(0.06)
    await socket(chunk("alone"))
    assert socket.gap == 0.01


async def test_took_holds_a_chunk_only_while_a_frame_is_held_back() -> None:
    sent: list[dict[str, Any]] = []

    async def send(frame: dict[str, Any]) -> None:
        sent.append(frame)

    socket = ChunkCoalescer(send, window=0.05)
    # Nothing sent for a while: the chunk is to leave now, which `took` leaves to the caller.
    assert not socket.took(chunk("a"))
    await socket(chunk("a"))
    # Within the window it is held, and leaves with the next frame.
    assert socket.took(chunk("b"))
    assert socket.took(chunk("c"))
    # Another message's chunk cannot join this one's frame.
    assert not socket.took(StreamChunk(msg_id="m2", content="x"))
    await asyncio.sleep(0.1)
    assert [f["content"] for f in sent] == ["a", "bc"]
