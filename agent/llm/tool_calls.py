"""A model's tool calls: as the loop gets them (`ToolCall`), and joined from the fragments a
stream sends (`ToolCallAssembler`), their text cleaned where it enters (`agent.cleantext`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agent.cleantext import clean_arguments, clean_text


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str

    def as_message_part(self, arguments: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {
                "name": self.name,
                "arguments": self.arguments if arguments is None else arguments,
            },
        }


class ToolCallAssembler:
    """Joins streamed tool-call fragments into whole calls.

    Fragments are joined by index, as OpenAI sends them: two calls at different indexes
    stay two calls even when they carry the same id, which `calls` then makes unique. But
    providers differ: some omit the index, some send every call at index 0 with a fresh id.
    A fresh id at a known index starts a new call; without an index, a fragment continues
    the call of its id, or the last call when it has none.
    """

    def __init__(self) -> None:
        self._calls: list[dict[str, Any]] = []
        self._by_index: dict[int, dict[str, Any]] = {}
        self._by_id: dict[str, dict[str, Any]] = {}

    def add(self, fragment: Any) -> None:
        index = field_of(fragment, "index")
        call_id = field_of(fragment, "id") or ""
        function = field_of(fragment, "function")
        name = field_of(function, "name") or ""
        arguments = field_of(function, "arguments") or ""

        call = None
        if index is not None:
            known = self._by_index.get(index)
            if known is not None and not (call_id and known["id"] and known["id"] != call_id):
                call = known
        elif call_id:
            call = self._by_id.get(call_id)
        elif self._calls:
            call = self._calls[-1]
        if call is None:
            call = {"id": call_id, "name": "", "arguments": ""}
            self._calls.append(call)
        if index is not None:
            self._by_index[index] = call
        if call_id:
            call["id"] = call_id
            self._by_id.setdefault(call_id, call)
        if name and not call["name"].endswith(name):
            call["name"] += name
        call["arguments"] += arguments

    def calls(self) -> list[ToolCall]:
        """The whole calls, in order, their text cleaned (`agent.cleantext`) and each id
        unique: the results are matched to the calls by id, here and by the provider."""
        result = []
        taken: set[str] = set()
        for position, call in enumerate(self._calls):
            if not call["name"]:
                continue
            call_id = clean_text(call["id"]) or f"call_{position}_{int(time.time() * 1000)}"
            if call_id in taken:
                call_id = unique_id(call_id, taken)
            taken.add(call_id)
            result.append(
                ToolCall(
                    id=call_id,
                    name=clean_text(call["name"]),
                    arguments=clean_arguments(call["arguments"]),
                )
            )
        return result


def unique_id(call_id: str, taken: set[str]) -> str:
    """`call_id` with the first suffix `_2`, `_3`, ... that no other call of the answer has:
    an underscore and digits, which the providers that check ids' characters allow."""
    number = 2
    while f"{call_id}_{number}" in taken:
        number += 1
    return f"{call_id}_{number}"


def field_of(obj: Any, key: str) -> Any:
    """`obj[key]` of a dict, or the attribute of an object (litellm's chunks are objects)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)
