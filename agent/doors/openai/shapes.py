"""The answers in OpenAI's shapes: a `chat.completion`, the `chat.completion.chunk` events
of a stream, and `usage`."""

from __future__ import annotations

import functools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

DONE = b"data: [DONE]\n\n"
# A comment line: clients skip it, and proxies see the connection is alive during a long
# tool call.
KEEPALIVE = b": keep-alive\n\n"
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(frozen=True)
class Reply:
    """What every object of one answer repeats."""

    model: str
    include_usage: bool = False
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def completion(
        self,
        *,
        text: str,
        reasoning: str,
        finish: str,
        usage: dict[str, int],
        tool_calls: list[dict[str, Any]] | None = None,
        logprobs: list[Any] | None = None,
    ) -> dict[str, Any]:
        content = text if text or not tool_calls else None
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        if reasoning:
            message["reasoning_content"] = reasoning
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": _logprobs(logprobs),
                    "finish_reason": finish,
                }
            ],
            "usage": usage_of(usage),
            "system_fingerprint": None,
        }

    def chunk(
        self, delta: dict[str, Any], finish: str | None = None, *, logprobs: list[Any] | None = None
    ) -> bytes:
        if finish is None and logprobs is None:
            # The one part of most chunks that changes: the rest is made once per answer.
            head, tail = self._delta_frame
            return head + json.dumps(delta, ensure_ascii=False).encode() + tail
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": _logprobs(logprobs),
            "finish_reason": finish,
        }
        return self._event({"choices": [choice]})

    @functools.cached_property
    def _delta_frame(self) -> tuple[bytes, bytes]:
        marker = "\x00delta\x00"
        choice = {"index": 0, "delta": marker, "logprobs": None, "finish_reason": None}
        head, tail = self._event({"choices": [choice]}).split(json.dumps(marker).encode())
        return head, tail

    def usage_chunk(self, usage: dict[str, int]) -> bytes:
        return self._event({"choices": [], "usage": usage_of(usage)})

    def _event(self, fields: dict[str, Any]) -> bytes:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            **fields,
        }
        if self.include_usage:
            # As OpenAI does: every chunk says `usage`, null until the last.
            body.setdefault("usage", None)
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


def usage_of(usage: dict[str, int]) -> dict[str, int]:
    counts = {key: int(usage.get(key) or 0) for key in USAGE_KEYS}
    if not counts["total_tokens"]:
        counts["total_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
    return counts


def _logprobs(content: list[Any] | None) -> dict[str, Any] | None:
    return None if content is None else {"content": content, "refusal": None}
