"""A chat completion's `messages`, checked as OpenAI checks them and read into what a turn
needs: the new message (the last user message) with its files, the conversation before
it, the client's instructions (its system and developer messages), and, when the request
ends with the results of the client's tools rather than a new message, what the turn goes
on from.

Files (`image_url`, `input_audio`, `file` parts) are checked for their shape here; the
turn reads, keeps and shows them (`agent.turn` refuses them, naming the part, for a model
that cannot take them). A user message of the history keeps its parts, so that the turn
can show its files as the model can take them; every other message is text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.doors.openai.errors import invalid, invalid_type, missing, unsupported
from agent.turn import InvalidInput, validate_content

ROLES = ("system", "developer", "user", "assistant", "tool")
TEXT_PARTS = {"user": ("text",), "assistant": ("text", "refusal")}
FILE_PARTS = ("image_url", "input_audio", "file")
IMAGE_DETAILS = ("auto", "low", "high")
AUDIO_FORMATS = ("wav", "mp3")
# Half of a UTF-16 pair on its own: JSON carries it, no text encoding stores it.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Conversation:
    content: str  # the text of the new message (of the turn's, for a continuation)
    # That message as the client sent it.
    message: dict[str, Any]
    # Its files, each with the parameter that names it.
    attachments: tuple[tuple[str, dict[str, Any]], ...]
    history: tuple[dict[str, Any], ...]
    instructions: str
    # For a request that ends with the results of the client's tools: the messages after
    # the turn's user message, and the results by call id.
    turn: tuple[dict[str, Any], ...] | None
    results: tuple[tuple[str, str], ...]


def read_conversation(messages: object) -> Conversation:
    if messages is None:
        raise missing("messages")
    if not isinstance(messages, list):
        raise invalid_type("messages", "an array", messages)
    if not messages:
        raise invalid(
            "messages",
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but "
            "got an empty array instead.",
            code="empty_array",
        )
    read: list[tuple[int, dict[str, Any]]] = []
    instructions: list[str] = []
    for index, message in enumerate(messages):
        one = _message(message, f"messages[{index}]")
        if one["role"] in ("system", "developer"):
            instructions.append(_joined(one["content"]))
        else:
            read.append((index, one))
    users = [position for position, (_, one) in enumerate(read) if one["role"] == "user"]
    last = len(messages) - 1
    if not users or messages[last]["role"] not in ("user", "tool"):
        raise invalid(
            f"messages[{last}].role",
            "The last message must be the user's, or the results of your tools: it is the "
            "one the agent answers.",
        )
    at = users[-1]
    index, new = read[at]
    text, attachments = _new_message(new["content"], f"messages[{index}].content")
    after = tuple(one for _, one in read[at + 1 :])
    results = tuple(
        (one["tool_call_id"], _joined(one["content"])) for one in after if one["role"] == "tool"
    )
    return Conversation(
        content=text,
        message=new,
        attachments=attachments,
        history=tuple(one for _, one in read[:at]),
        instructions="\n\n".join(text for text in instructions if text.strip()),
        turn=after if after else None,
        results=results,
    )


def _new_message(content: Any, where: str) -> tuple[str, tuple[tuple[str, dict[str, Any]], ...]]:
    if isinstance(content, str):
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}]
    else:
        parts = content
    texts = [part["text"] for part in parts if part["type"] == "text"]
    attachments = tuple(
        (f"{where}[{number}]", part)
        for number, part in enumerate(parts)
        if part["type"] in FILE_PARTS
    )
    text = "\n".join(texts)
    if not text.strip() and attachments:
        # A message of files alone: the model reads them with a word of the user's.
        text = "(See the attached file.)" if len(attachments) == 1 else "(See the attached files.)"
    try:
        return validate_content(text, field=where), attachments
    except InvalidInput as exc:
        raise invalid(exc.field, f"Invalid '{where}': {exc}.") from None


def _joined(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text") or part.get("refusal") or "" for part in content)


def _message(message: object, where: str) -> dict[str, Any]:
    """One message, checked, as the model is sent it."""
    if not isinstance(message, dict):
        raise invalid_type(where, "an object", message)
    role = message.get("role")
    if role is None:
        raise missing(f"{where}.role")
    if role not in ROLES:
        supported = ", ".join(f"'{name}'" for name in ROLES)
        raise invalid(
            f"{where}.role", f"Invalid value: '{role}'. Supported values are: {supported}."
        )
    content = message.get("content")
    read: dict[str, Any] = {"role": role}
    if role == "assistant" and content is None:
        if not message.get("tool_calls") and message.get("refusal") is None:
            raise missing(f"{where}.content")
        read["content"] = None
    elif role == "user":
        read["content"] = _user_content(content, f"{where}.content")
    else:
        read["content"] = _joined(
            _parts(content, f"{where}.content", TEXT_PARTS.get(role, ("text",)))
        )
    if role == "assistant" and message.get("tool_calls") is not None:
        read["tool_calls"] = _tool_calls(message["tool_calls"], f"{where}.tool_calls")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if call_id is None:
            raise missing(f"{where}.tool_call_id")
        if not isinstance(call_id, str):
            raise invalid_type(f"{where}.tool_call_id", "a string", call_id)
        read["tool_call_id"] = call_id
    return read


def _user_content(content: object, where: str) -> str | list[dict[str, Any]]:
    """A user message's content: its text, or its parts when it has files."""
    parts = _parts(content, where, ("text", *FILE_PARTS))
    if isinstance(parts, str) or not any(part["type"] in FILE_PARTS for part in parts):
        return _joined(parts)
    return parts


def _parts(content: object, where: str, kinds: tuple[str, ...]) -> str | list[dict[str, Any]]:
    """A message's content: a string, or an array of parts of `kinds`, each checked."""
    if content is None:
        raise missing(where)
    if isinstance(content, str):
        _no_surrogate(content, where)
        return content
    if not isinstance(content, list):
        raise invalid_type(where, "a string or an array", content)
    parts = []
    for index, part in enumerate(content):
        at = f"{where}[{index}]"
        if not isinstance(part, dict):
            raise invalid_type(at, "an object", part)
        kind = part.get("type")
        if kind not in kinds:
            if kind in FILE_PARTS or kind == "input_image":
                raise unsupported(f"{at}.type", f"Content of type '{kind}' is not supported here.")
            supported = ", ".join(f"'{name}'" for name in kinds)
            raise invalid(
                f"{at}.type", f"Invalid value: '{kind}'. Supported values are: {supported}."
            )
        parts.append(_file_part(part, at) if kind in FILE_PARTS else _text_part(part, kind, at))
    return parts


def _text_part(part: dict[str, Any], kind: str, at: str) -> dict[str, Any]:
    text = part.get(kind)
    if not isinstance(text, str):
        raise invalid_type(f"{at}.{kind}", "a string", text)
    _no_surrogate(text, f"{at}.{kind}")
    return {"type": kind, kind: text}


def _file_part(part: dict[str, Any], at: str) -> dict[str, Any]:
    kind = part["type"]
    body = part.get(kind)
    if not isinstance(body, dict):
        raise invalid_type(f"{at}.{kind}", "an object", body)
    if kind == "image_url":
        url = body.get("url")
        if not isinstance(url, str):
            raise invalid_type(f"{at}.image_url.url", "a string", url)
        if not url.startswith(("data:", "http://", "https://")):
            raise invalid(
                f"{at}.image_url.url",
                "Invalid image URL: expected a base64-encoded data URL or an http(s) URL.",
            )
        detail = body.get("detail")
        if detail is not None and detail not in IMAGE_DETAILS:
            raise invalid(f"{at}.image_url.detail", f"Invalid value: '{detail}'.")
        image = {"url": url, **({"detail": detail} if detail else {})}
        return {"type": kind, "image_url": image}
    if kind == "input_audio":
        data, audio_format = body.get("data"), body.get("format")
        if not isinstance(data, str):
            raise invalid_type(f"{at}.input_audio.data", "a string", data)
        if audio_format not in AUDIO_FORMATS:
            raise invalid(f"{at}.input_audio.format", f"Invalid value: '{audio_format}'.")
        return {"type": kind, "input_audio": {"data": data, "format": audio_format}}
    if body.get("file_id") is not None:
        raise unsupported(
            f"{at}.file.file_id", "Files by id are not supported: send 'file_data' instead."
        )
    data = body.get("file_data")
    if not isinstance(data, str):
        raise invalid_type(f"{at}.file.file_data", "a string", data)
    name = body.get("filename")
    if name is not None and not isinstance(name, str):
        raise invalid_type(f"{at}.file.filename", "a string", name)
    return {"type": kind, "file": {"file_data": data, **({"filename": name} if name else {})}}


def _tool_calls(calls: object, where: str) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        raise invalid_type(where, "an array", calls)
    read = []
    for index, call in enumerate(calls):
        at = f"{where}[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(function, dict):
            raise invalid(at, f"Invalid '{at}': expected an object with 'id' and 'function'.")
        fields = {
            f"{at}.id": call.get("id"),
            f"{at}.function.name": function.get("name"),
            f"{at}.function.arguments": function.get("arguments"),
        }
        for param, value in fields.items():
            if not isinstance(value, str):
                raise invalid_type(param, "a string", value)
            _no_surrogate(value, param)
        call_id, name, arguments = fields.values()
        read.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
    return read


def _no_surrogate(text: str, where: str) -> None:
    if _SURROGATE.search(text):
        raise invalid(where, f"Invalid '{where}': it contains an unpaired surrogate character.")
