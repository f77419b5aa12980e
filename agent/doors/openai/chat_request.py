"""A chat completion request, checked the way OpenAI's API checks it, and read into what a
turn needs: the new message (the last one, a user's), the conversation before it, the
client's instructions (its system and developer messages), the model, the session and the
generation settings.

Every refusal names the parameter at fault (`messages[2].content`) in OpenAI's error shape;
nothing is recorded before the whole request passed. Parameters OpenAI knows and a turn
cannot honour (several choices, images, audio, the client's own tools, structured output,
log probabilities) are refused rather than quietly dropped; other parameters of OpenAI's
(`top_p`, `stop`, `seed`, penalties, `metadata`, ...) are checked for their type and
otherwise left alone, and fields OpenAI does not know are ignored, as clients made for many
servers send some.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.conf import AgentSettings
from agent.doors.openai.errors import (
    invalid,
    invalid_type,
    missing,
    model_not_found,
    unsupported,
)
from agent.doors.openai.models import Choice, choice_of
from agent.turn import InvalidInput, validate_content
from sessions_app import keys

CHANNEL = keys.USER_CHANNELS[2]  # "openai"
SESSION_HEADER = "X-Session-Key"
ROLES = ("system", "developer", "user", "assistant", "tool")
TEXT_PARTS = {"user": ("text",), "assistant": ("text", "refusal")}
# Half of a UTF-16 pair on its own: JSON carries it, no text encoding stores it.
_SURROGATE = re.compile("[\ud800-\udfff]")

# Parameters read elsewhere, or only checked: their JSON type (`number` excludes booleans).
_TYPES: dict[str, tuple[str, ...]] = {
    "stream": ("boolean",),
    "stream_options": ("object",),
    "temperature": ("number",),
    "top_p": ("number",),
    "max_tokens": ("integer",),
    "max_completion_tokens": ("integer",),
    "n": ("integer",),
    "user": ("string",),
    "seed": ("integer",),
    "stop": ("string", "array"),
    "presence_penalty": ("number",),
    "frequency_penalty": ("number",),
    "logit_bias": ("object",),
    "logprobs": ("boolean",),
    "top_logprobs": ("integer",),
    "metadata": ("object",),
    "store": ("boolean",),
    "parallel_tool_calls": ("boolean",),
    "tools": ("array",),
    "functions": ("array",),
    "tool_choice": ("string", "object"),
    "function_call": ("string", "object"),
    "response_format": ("object",),
    "modalities": ("array",),
}
_RANGES = {
    "temperature": (0, 2),
    "top_p": (0, 1),
    "presence_penalty": (-2, 2),
    "frequency_penalty": (-2, 2),
    "top_logprobs": (0, 20),
}
_EXPECTED = {
    "boolean": "a boolean",
    "object": "an object",
    "number": "a decimal",
    "integer": "an integer",
    "string": "a string",
    "array": "an array",
}


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str  # the id asked for, which the answer repeats
    choice: Choice
    content: str  # the new user message
    history: tuple[dict[str, Any], ...]
    instructions: str
    stream: bool
    include_usage: bool
    temperature: float | None
    max_tokens: int | None
    # The chat id of the session the turn lands in, when the client named one.
    session: str | None


def read_chat_request(
    body: object, *, session_header: str | None, conf: AgentSettings
) -> ChatRequest:
    if not isinstance(body, dict):
        raise invalid(None, "The body must be a JSON object.", code=None)
    for name, kinds in _TYPES.items():
        value = body.get(name)
        if value is not None and not any(_is(value, kind) for kind in kinds):
            raise invalid_type(name, " or ".join(_EXPECTED[kind] for kind in kinds), value)
    for name, (low, high) in _RANGES.items():
        value = body.get(name)
        if value is not None and not low <= value <= high:
            raise invalid(name, f"Invalid '{name}': expected a value from {low} to {high}.")
    choice = _model(body, conf)
    _refuse_what_a_turn_cannot_do(body)
    stream = bool(body.get("stream"))
    options = body.get("stream_options")
    if options is not None and not stream:
        raise invalid(
            "stream_options",
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
        )
    include_usage = (options or {}).get("include_usage")
    if include_usage is not None and not isinstance(include_usage, bool):
        raise invalid_type("stream_options.include_usage", "a boolean", include_usage)
    max_tokens = _max_tokens(body)
    content, history, instructions = _conversation(body.get("messages"))
    return ChatRequest(
        model=body["model"],
        choice=choice,
        content=content,
        history=history,
        instructions=instructions,
        stream=stream,
        include_usage=bool(include_usage),
        temperature=body.get("temperature"),
        max_tokens=max_tokens,
        session=_session(body.get("user"), session_header),
    )


def _is(value: object, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    python = {"boolean": bool, "object": dict, "string": str, "array": list}[kind]
    return isinstance(value, python)


def _model(body: dict[str, Any], conf: AgentSettings) -> Choice:
    name = body.get("model")
    if name is None:
        raise missing("model")
    if not isinstance(name, str):
        raise invalid_type("model", "a string", name)
    choice = choice_of(name, conf)
    if choice is None:
        raise model_not_found(name)
    return choice


def _refuse_what_a_turn_cannot_do(body: dict[str, Any]) -> None:
    n = body.get("n")
    if n is not None and n < 1:
        raise invalid("n", "Invalid 'n': expected a value of at least 1.")
    if n is not None and n > 1:
        raise unsupported("n", "Only n=1 is supported: a turn gives one answer.")
    for name in ("tools", "functions"):
        if body.get(name):
            raise unsupported(
                name,
                f"'{name}' is not supported: the agent's own tools run on the server. Use the "
                "model agentsite-plain for a generation without them.",
                value=False,
            )
    for name in ("tool_choice", "function_call"):
        if body.get(name) not in (None, "none", "auto"):
            raise unsupported(name, f"'{name}' is not supported: no client tools are offered.")
    if body.get("audio") is not None or "audio" in (body.get("modalities") or ()):
        raise unsupported("modalities", "Audio output is not supported: the answer is text.")
    if (body.get("response_format") or {}).get("type", "text") != "text":
        raise unsupported("response_format.type", "Only the 'text' response format is supported.")
    if body.get("logprobs"):
        raise unsupported("logprobs", "Log probabilities are not supported.")


def _max_tokens(body: dict[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is not None:
            if value < 1:
                raise invalid(name, f"Invalid '{name}': expected a value of at least 1.")
            return int(value)
    return None


def _conversation(
    messages: object,
) -> tuple[str, tuple[dict[str, Any], ...], str]:
    """The new message, the conversation before it, and the client's instructions."""
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
    history: list[dict[str, Any]] = []
    instructions: list[str] = []
    for index, message in enumerate(messages):
        read = _message(message, f"messages[{index}]")
        if read["role"] in ("system", "developer"):
            instructions.append(read["content"])
        else:
            history.append(read)
    last = len(messages) - 1
    if messages[last]["role"] != "user":
        raise invalid(
            f"messages[{last}].role",
            "The last message must be the user's: it is the one the agent answers.",
        )
    new = history.pop()
    try:
        content = validate_content(new["content"], field=f"messages[{last}].content")
    except InvalidInput as exc:
        raise invalid(exc.field, f"Invalid 'messages[{last}].content': {exc}.") from None
    return content, tuple(history), "\n\n".join(text for text in instructions if text.strip())


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
    else:
        read["content"] = _text(content, f"{where}.content", TEXT_PARTS.get(role, ("text",)))
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


def _text(content: object, where: str, kinds: tuple[str, ...]) -> str:
    """A message's content as text: a string, or an array of text parts."""
    if content is None:
        raise missing(where)
    if isinstance(content, str):
        _no_surrogate(content, where)
        return content
    if not isinstance(content, list):
        raise invalid_type(where, "a string or an array", content)
    texts = []
    for index, part in enumerate(content):
        at = f"{where}[{index}]"
        if not isinstance(part, dict):
            raise invalid_type(at, "an object", part)
        kind = part.get("type")
        if kind not in kinds:
            if kind in ("image_url", "input_audio", "file", "input_image"):
                raise unsupported(f"{at}.type", f"Content of type '{kind}' is not supported.")
            supported = ", ".join(f"'{name}'" for name in kinds)
            raise invalid(
                f"{at}.type", f"Invalid value: '{kind}'. Supported values are: {supported}."
            )
        text = part.get(kind)
        if not isinstance(text, str):
            raise invalid_type(f"{at}.{kind}", "a string", text)
        _no_surrogate(text, f"{at}.{kind}")
        texts.append(text)
    return "\n".join(texts)


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


def _session(user: str | None, header: str | None) -> str | None:
    """The chat id of the session named by the `X-Session-Key` header or `user`: a chat id,
    or the whole `openai:<chat id>` key."""
    for value, param in ((header, SESSION_HEADER), (user, "user")):
        if value is None:
            continue
        chat_id = value.removeprefix(f"{CHANNEL}:")
        if not keys.is_chat_id(chat_id):
            raise invalid(
                param,
                f"Invalid '{param}': it names the session openai:<it>, so it is 1 to 190 of "
                "A-Z a-z 0-9 _ . @ - (and not . or ..).",
            )
        return chat_id
    return None
