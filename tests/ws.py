"""Helpers for WebSocket tests."""

from __future__ import annotations

from typing import Any

from channels.testing import WebsocketCommunicator

from agentsite.asgi import application

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")


def communicator(
    path: str, *, headers: list[tuple[bytes, bytes]] | None = None
) -> WebsocketCommunicator:
    """A socket as the site's own page opens it (Host and Origin agree), unless `headers`."""
    return WebsocketCommunicator(
        application, path, headers=headers if headers is not None else [HOST, ORIGIN]
    )


async def receive_until(
    socket: WebsocketCommunicator, frame_type: str, *, timeout: float = 10, **match: Any
) -> list[dict[str, Any]]:
    """Every frame up to and including the first of `frame_type` (with `match`ing fields)."""
    frames = []
    while True:
        frame = await socket.receive_json_from(timeout=timeout)
        frames.append(frame)
        if frame["type"] == frame_type and all(frame.get(k) == v for k, v in match.items()):
            return frames


async def open_chat(chat_id: str, token: str) -> tuple[WebsocketCommunicator, dict[str, Any]]:
    """A connected socket on chat `chat_id` for the user of `token`, and its history frame."""
    socket = communicator(f"/ws/chat/{chat_id}/?token={token}")
    connected, _ = await socket.connect()
    assert connected
    history = await socket.receive_json_from()
    assert history["type"] == "history"
    return socket, history
