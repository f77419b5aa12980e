"""What the sockets of bench/concurrency.py saw of a turn's streamed reply, and the floor
they are measured against.

The scripted model writes each chunk of the reply as the wall-clock time it sent it
(`<ns>`), so a socket that receives a chunk knows its delay, and the saved reply (the
final `message`) lists every chunk the turn streamed: a socket that did not receive one
of them lost it. The site joins chunks that come close together into one frame; a chunk
here is the model's, however many share a frame.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from bench._loops import TOOL, _answer

STAMP = re.compile(r"<(\d+)>")
# Why turns failed, and how often: printed under the figures.
FAILURES: collections.Counter[str] = collections.Counter()


class Reply:
    """One socket's view of one turn's reply: the chunks it received and when, and the
    saved reply once its final `message` came."""

    def __init__(self) -> None:
        self.stamps: list[int] = []
        self.received: list[int] = []
        self.saved: list[int] | None = None

    async def read(self, ws: Any) -> bool:
        """Read frames until the turn's final message (True) or an error (False)."""
        while True:
            frame = json.loads(await ws.recv())
            now = time.time_ns()
            kind = frame["type"]
            if kind == "stream_chunk":
                for stamp in STAMP.findall(frame["content"]):
                    self.stamps.append(int(stamp))
                    self.received.append(now)
            elif kind == "message" and frame.get("role") == "assistant":
                self.saved = [int(stamp) for stamp in STAMP.findall(frame.get("content") or "")]
                return True
            elif kind == "error":
                FAILURES[str(frame.get("message"))[:80]] += 1
                return False


@dataclass
class Tally:
    """The chunks every socket of a layout received, against the replies saved."""

    delays: list[float] = field(default_factory=list)  # ms, one per chunk received
    lost: int = 0  # chunks of a saved reply that a socket never received
    doubled: int = 0  # chunks a socket received more than once
    # The delays of the sockets on another process than the turn's, among `delays`.
    elsewhere: list[float] = field(default_factory=list)

    @property
    def delivered(self) -> int:
        return len(self.delays)

    def add(self, reply: Reply, saved: list[int] | None, *, elsewhere: bool = False) -> None:
        """`reply` as one socket saw it; `saved`, the turn's reply as it was saved (that
        socket's own final message, or another socket's when it never got one);
        `elsewhere`, whether the socket is on another process than the turn."""
        delays = [
            (at - stamp) / 1e6 for stamp, at in zip(reply.stamps, reply.received, strict=True)
        ]
        self.delays += delays
        if elsewhere:
            self.elsewhere += delays
        got = set(reply.stamps)
        self.lost += len(set(saved or ()) - got)
        self.doubled += len(reply.stamps) - len(got)

    def percentile(self, share: float, *, elsewhere: bool = False) -> float:
        ordered = sorted(self.elsewhere if elsewhere else self.delays) or [0.0]
        return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


async def bare_floor(base_url: str, conversations: int) -> tuple[float, float, Tally]:
    """`conversations` tool conversations at once on bare httpx straight to the model, no
    site: what this machine's cores, shared with the model, allow. Their wall time, this
    process's CPU seconds for them, and the chunks of their replies as they arrived."""
    tally = Tally()
    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(_bare_conversation(base_url, tally) for _ in range(conversations)))
    return time.perf_counter() - started, time.process_time() - cpu, tally


async def _bare_conversation(base_url: str, tally: Tally) -> None:
    """`bench._loops.httpx_loop`'s one turn, which also times the reply's chunks. A client
    each, as there: making one costs some 17 ms of CPU, yet 200 connections in one client's
    pool cost it twice as much in all."""
    import httpx

    async with httpx.AsyncClient(
        base_url=base_url, headers={"Authorization": "Bearer bench"}, timeout=60
    ) as client:
        await _bare_turn(client, tally)


async def _bare_turn(client: Any, tally: Tally) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "bench"}]
    messages.append({"role": "user", "content": "read hello.txt"})
    reply = Reply()
    while True:
        body = {
            "model": "scripted",
            "messages": messages,
            "tools": [TOOL],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        text = ""
        calls: dict[int, dict[str, str]] = {}
        async with client.stream("POST", "/chat/completions", json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                data = line[5:].strip() if line.startswith("data:") else ""
                if not data or data == "[DONE]":
                    continue
                chunk = json.loads(data)
                delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                content = delta.get("content") or ""
                now = time.time_ns()
                for stamp in STAMP.findall(content):
                    reply.stamps.append(int(stamp))
                    reply.received.append(now)
                text += content
                for tc in delta.get("tool_calls") or ():
                    call = calls.setdefault(
                        tc["index"], {"id": tc.get("id"), "name": "", "args": ""}
                    )
                    function = tc.get("function") or {}
                    call["name"] += function.get("name") or ""
                    call["args"] += function.get("arguments") or ""
        if not _answer(messages, text, calls):
            break
    tally.add(reply, [int(stamp) for stamp in STAMP.findall(text)])
