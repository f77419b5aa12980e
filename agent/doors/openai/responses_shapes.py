"""The Responses API's shapes: a `response` object, its output items (the agent's progress
as a `reasoning` item, its text as a `message`, the calls of the client's tools as
`function_call`s), and the server-sent events of a stream, numbered in order."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class ResponseShape:
    """What every object and event of one answer repeats."""

    def __init__(self, *, model: str, echo: dict[str, Any]) -> None:
        self.id = new_id("resp")
        self.model = model
        self.echo = echo
        self.created_at = int(time.time())
        self.sequence = 0

    def response(
        self,
        *,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, int] | None = None,
        error: dict[str, str] | None = None,
        incomplete: str | None = None,
    ) -> dict[str, Any]:
        done = status not in ("in_progress", "queued")
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "completed_at": int(time.time()) if done else None,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "model": self.model,
            "output": output,
            "reasoning": {"effort": None, "summary": None},
            "truncation": "disabled",
            "usage": usage_of(usage) if usage is not None else None,
            **self.echo,
        }

    def event(self, kind: str, **fields: Any) -> bytes:
        body = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        data = json.dumps(body, ensure_ascii=False)
        return f"event: {kind}\ndata: {data}\n\n".encode()


def message_item(item_id: str, text: str, *, status: str = "completed") -> dict[str, Any]:
    content = [text_part(text)] if status == "completed" else []
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content,
    }


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_item(item_id: str, text: str, *, status: str = "completed") -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if status == "completed" else []
    return {"type": "reasoning", "id": item_id, "summary": summary, "status": status}


def call_item(call: dict[str, str], *, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call['id']}",
        "call_id": call["id"],
        "name": call["name"],
        "arguments": call["arguments"] if status == "completed" else "",
        "status": status,
    }


def usage_of(usage: dict[str, int]) -> dict[str, Any]:
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
    }
