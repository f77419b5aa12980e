"""A Responses API request (`POST /v1/responses`), checked as OpenAI checks it and read into
what a turn needs, by way of the chat completions' own reading: its `input` items become
chat messages (a `function_call` an assistant's call, a `function_call_output` a tool's
result; the reasoning items a client echoes back are the agent's own progress and are left
out), its function tools and `text.format` the same tools and response format.

With `previous_response_id` the conversation is the one that response belongs to, kept
on the server: `input` then holds only what is new, a message or the results of the
client's tools. `instructions` are the request's own, never carried over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.conf import AgentSettings
from agent.doors.openai.chat_messages import Conversation, read_conversation
from agent.doors.openai.chat_request import (
    EXPECTED,
    housekeeping,
    is_json_type,
    model_choice,
    named_session,
)
from agent.doors.openai.chat_tools import ClientTools, function_definition, read_params, read_tools
from agent.doors.openai.errors import invalid, invalid_type, missing, unsupported
from agent.doors.openai.models import Choice

_TYPES: dict[str, str] = {
    "input": "",  # a string or an array: checked below
    "instructions": "string",
    "previous_response_id": "string",
    "stream": "boolean",
    "store": "boolean",
    "temperature": "number",
    "top_p": "number",
    "max_output_tokens": "integer",
    "parallel_tool_calls": "boolean",
    "tools": "array",
    "text": "object",
    "reasoning": "object",
    "metadata": "object",
    "user": "string",
    "top_logprobs": "integer",
}
# Echoed in the answer as the request set them.
ECHOED = ("instructions", "metadata", "temperature", "top_p", "max_output_tokens", "user")
# The stand-in for the message of a turn that a request continues by its previous
# response: the door reads the message itself back.
CONTINUED = "(continued)"
_PART_TYPES = {"input_text": "text", "output_text": "text", "refusal": "text"}


@dataclass(frozen=True, slots=True)
class ResponsesRequest:
    model: str
    choice: Choice
    conversation: Conversation
    tools: ClientTools
    params: tuple[tuple[str, Any], ...]
    stream: bool
    store: bool
    previous: str | None
    temperature: float | None
    max_tokens: int | None
    session: str | None
    # What the answer repeats of the request (`instructions`, `tools`, `text`...).
    echo: dict[str, Any]


def read_responses_request(
    body: object, *, session_header: str | None, conf: AgentSettings
) -> ResponsesRequest:
    if not isinstance(body, dict):
        raise invalid(None, "The body must be a JSON object.", code=None)
    for name, kind in _TYPES.items():
        value = body.get(name)
        if value is not None and kind and not is_json_type(value, kind):
            raise invalid_type(name, EXPECTED[kind], value)
    choice = model_choice(body, conf)
    for name in ("background", "conversation", "prompt"):
        if body.get(name):
            raise unsupported(name, f"'{name}' is not supported here.", value=False)
    previous = body.get("previous_response_id")
    messages = _messages(body.get("input"))
    if previous is not None and not any(m["role"] == "user" for m in messages):
        # Only the results of the client's tools: the turn they continue is the previous
        # response's, whose message the door reads back (`CONTINUED`).
        messages.insert(0, {"role": "user", "content": CONTINUED})
    instructions = body.get("instructions")
    if instructions:
        messages.insert(0, {"role": "developer", "content": instructions})
    tools = _tools(body)
    chat_shaped = {
        "tools": tools,
        "tool_choice": _tool_choice(body.get("tool_choice")),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "top_p": body.get("top_p"),
        "top_logprobs": body.get("top_logprobs"),
        "logprobs": True if body.get("top_logprobs") else None,
        "response_format": _format(body.get("text")),
    }
    client_tools = read_tools(chat_shaped)
    params = list(read_params(chat_shaped, tools=bool(tools)))
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None:
        params.append(("reasoning_effort", effort))
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and max_tokens < 1:
        raise invalid("max_output_tokens", "Invalid 'max_output_tokens': at least 1.")
    conversation = read_conversation(messages)
    if not choice.direct and not body.get("stream") and not tools and housekeeping(conversation):
        choice = Choice(direct=True, model=choice.model)
    echo = {name: body.get(name) for name in ECHOED}
    echo.update(
        tools=body.get("tools") or [],
        tool_choice=body.get("tool_choice") or "auto",
        parallel_tool_calls=body.get("parallel_tool_calls", True),
        text=body.get("text") or {"format": {"type": "text"}},
        previous_response_id=previous,
        store=body.get("store", True),
        metadata=body.get("metadata") or {},
    )
    return ResponsesRequest(
        model=body["model"],
        choice=choice,
        conversation=conversation,
        tools=client_tools,
        params=tuple(params),
        stream=bool(body.get("stream")),
        store=body.get("store", True) is not False,
        previous=previous,
        temperature=body.get("temperature"),
        max_tokens=max_tokens,
        session=named_session(body.get("user"), session_header),
        echo=echo,
    )


def _messages(value: object) -> list[dict[str, Any]]:
    """`input` as chat messages."""
    if value is None:
        raise missing("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise invalid_type("input", "a string or an array", value)
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise invalid_type(where, "an object", item)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, where))
        elif kind == "function_call":
            call = {
                "id": _text(item, "call_id", where),
                "type": "function",
                "function": {
                    "name": _text(item, "name", where),
                    "arguments": _text(item, "arguments", where),
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            if isinstance(output, list):
                output = "\n".join(str(part.get("text") or "") for part in output)
            if not isinstance(output, str):
                raise invalid_type(f"{where}.output", "a string or an array", output)
            tool_call = _text(item, "call_id", where)
            messages.append({"role": "tool", "tool_call_id": tool_call, "content": output})
        elif kind != "reasoning":  # the agent's own progress, echoed back: nothing to read
            raise unsupported(f"{where}.type", f"Input items of type '{kind}' are not supported.")
    if not messages:
        raise invalid("input", "Invalid 'input': there is nothing in it to answer.")
    return messages


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    content = item.get("content")
    if isinstance(content, list):
        content = [_part(part, f"{where}.content[{number}]") for number, part in enumerate(content)]
    return {"role": role, "content": content}


def _part(part: object, where: str) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise invalid_type(where, "an object", part)
    kind = part.get("type")
    if kind in _PART_TYPES:
        text = part.get("text", part.get("refusal"))
        return {"type": "text", "text": text}
    if kind == "input_image":
        if part.get("file_id"):
            raise unsupported(f"{where}.file_id", "Images by file id are not supported.")
        image = {"url": part.get("image_url")}
        if part.get("detail"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        if part.get("file_id") or part.get("file_url"):
            raise unsupported(where, "Files by id or URL are not supported: send 'file_data'.")
        document = {"file_data": part.get("file_data"), "filename": part.get("filename")}
        return {"type": "file", "file": {k: v for k, v in document.items() if v is not None}}
    raise invalid(f"{where}.type", f"Invalid value: '{kind}'.")


def _text(item: dict[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise invalid_type(f"{where}.{name}", "a string", value)
    return value


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's function tools, in the chat completions' shape."""
    tools = []
    for index, tool in enumerate(body.get("tools") or ()):
        where = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise invalid_type(where, "an object", tool)
        if tool.get("type") != "function":
            raise unsupported(
                f"{where}.type",
                f"Tools of type '{tool.get('type')}' are not supported: only 'function' tools, "
                "which your client runs.",
            )
        tools.append(function_definition(tool, where))
    return tools


def _tool_choice(choice: object) -> object:
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def _format(text: object) -> dict[str, Any] | None:
    """`text.format` as a chat completion's `response_format`."""
    form = text.get("format") if isinstance(text, dict) else None
    if not isinstance(form, dict) or form.get("type") in (None, "text"):
        return None
    if form.get("type") == "json_schema":
        schema = {
            key: form[key] for key in ("name", "schema", "strict", "description") if key in form
        }
        return {"type": "json_schema", "json_schema": schema}
    return {"type": form.get("type")}
