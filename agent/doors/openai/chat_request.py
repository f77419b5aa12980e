"""A chat completion request, checked the way OpenAI's API checks it, and read into what a
turn needs: its conversation (`chat_messages`), the client's tools and generation
parameters (`chat_tools`), the model, the session and the stream's settings.

Every refusal names the parameter at fault (`messages[2].content`) in OpenAI's error shape;
nothing is recorded before the whole request passed. Parameters OpenAI knows and a turn
cannot honour (several choices, audio output) are refused rather than quietly dropped;
the generation parameters go to the model, which refuses what it cannot honour (the turn
says so, naming it); `metadata`, `store` and `user` are read for their type, and fields
OpenAI does not know are ignored, as clients made for many servers send some.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.conf import AgentSettings
from agent.doors.openai.chat_messages import Conversation, read_conversation
from agent.doors.openai.chat_tools import ClientTools, read_params, read_tools
from agent.doors.openai.errors import (
    invalid,
    invalid_type,
    missing,
    model_not_found,
    unsupported,
)
from agent.doors.openai.models import Choice, choice_of
from sessions_app import keys

CHANNEL = keys.USER_CHANNELS[2]  # "openai"
SESSION_HEADER = "X-Session-Key"
# How a client's housekeeping prompt begins (`housekeeping`).
TASK_PROMPT = "### Task:"

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
EXPECTED = {
    "boolean": "a boolean",
    "object": "an object",
    "number": "a decimal",
    "integer": "an integer",
    "string": "a string",
    "array": "an array",
}


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A chat completion request, read."""

    model: str  # the id asked for, which the answer repeats
    choice: Choice
    conversation: Conversation
    tools: ClientTools
    # Sent to the model as they are (`stop`, `seed`, `response_format`...).
    params: tuple[tuple[str, Any], ...]
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
        if value is not None and not any(is_json_type(value, kind) for kind in kinds):
            raise invalid_type(name, " or ".join(EXPECTED[kind] for kind in kinds), value)
    for name, (low, high) in _RANGES.items():
        value = body.get(name)
        if value is not None and not low <= value <= high:
            raise invalid(name, f"Invalid '{name}': expected a value from {low} to {high}.")
    choice = model_choice(body, conf)
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
    tools = read_tools(body)
    conversation = read_conversation(body.get("messages"))
    if not choice.direct and not stream and not tools.definitions and housekeeping(conversation):
        choice = Choice(direct=True, model=choice.model)
    return ChatRequest(
        model=body["model"],
        choice=choice,
        conversation=conversation,
        tools=tools,
        params=read_params(body, tools=bool(tools.definitions)),
        stream=stream,
        include_usage=bool(include_usage),
        temperature=body.get("temperature"),
        max_tokens=max_tokens,
        session=named_session(body.get("user"), session_header),
    )


def is_json_type(value: object, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    python = {"boolean": bool, "object": dict, "string": str, "array": list}[kind]
    return isinstance(value, python)


def model_choice(body: dict[str, Any], conf: AgentSettings) -> Choice:
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
    if body.get("audio") is not None or "audio" in (body.get("modalities") or ()):
        raise unsupported("modalities", "Audio output is not supported: the answer is text.")


def _max_tokens(body: dict[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is not None:
            if value < 1:
                raise invalid(name, f"Invalid '{name}': expected a value of at least 1.")
            return int(value)
    return None


def housekeeping(conversation: Conversation) -> bool:
    """Whether a request is a client's housekeeping rather than a turn of a conversation:
    one message, no tools, an answer not streamed, that sets the model a task about a chat
    (Open WebUI's titles, tags, follow-up suggestions and autocompletion all open with
    `### Task:`). Such a request is a direct generation, whichever model it names: it runs
    no tools, does not count as one of the user's turns, and stays off the chat list."""
    return (
        not conversation.history
        and conversation.turn is None
        and not conversation.attachments
        and conversation.content.lstrip().startswith(TASK_PROMPT)
    )


def named_session(user: str | None, header: str | None) -> str | None:
    """The chat id of the session named by the `X-Session-Key` header or `user`: a chat id,
    or the whole `openai:<chat id>` key; or a team chat's whole key (`team:<id>`), which
    the door opens for the team's members."""
    for value, param in ((header, SESSION_HEADER), (user, "user")):
        if value is None:
            continue
        if keys.is_team_key(value) and keys.is_user_key(value):
            return value
        chat_id = value.removeprefix(f"{CHANNEL}:")
        if not keys.is_chat_id(chat_id):
            raise invalid(
                param,
                f"Invalid '{param}': it names the session openai:<it>, so it is 1 to 190 of "
                "A-Z a-z 0-9 _ . @ - (and not . or ..).",
            )
        return chat_id
    return None
