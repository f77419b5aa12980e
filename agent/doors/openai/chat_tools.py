"""A chat completion's client tools and generation parameters, checked as OpenAI checks
them: `tools` (and the older `functions`), `tool_choice` (`function_call`),
`parallel_tool_calls`, and the parameters that go to the model as they are (`stop`,
`top_p`, `seed`, the penalties, `response_format`, `logprobs`, `logit_bias`).

The Responses door reads its own shapes into the same `ClientTools`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.doors.openai.errors import invalid, invalid_type, unsupported

# OpenAI's rule for a function's name.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
CHOICES = ("none", "auto", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
MAX_STOP = 4
# Sent to the model as the client gave them, when it gave them.
PASSED = (
    "top_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
)


@dataclass(frozen=True, slots=True)
class ClientTools:
    definitions: tuple[dict[str, Any], ...] = ()
    choice: str | dict[str, Any] | None = None


def read_tools(body: dict[str, Any]) -> ClientTools:
    """The request's tools as OpenAI function definitions, and its `tool_choice`."""
    if body.get("tools") and body.get("functions"):
        raise invalid("functions", "Use 'tools' or the older 'functions', not both.")
    if body.get("functions"):
        definitions = tuple(
            function_definition(one, f"functions[{index}]")
            for index, one in enumerate(body["functions"])
        )
    else:
        definitions = tuple(
            _tool(one, f"tools[{index}]") for index, one in enumerate(body.get("tools") or ())
        )
    seen: set[str] = set()
    for index, tool in enumerate(definitions):
        name = tool["function"]["name"]
        if name in seen:
            raise invalid(f"tools[{index}].function.name", f"The tool name '{name}' is repeated.")
        seen.add(name)
    if body.get("tool_choice") is not None:
        choice = _choice(body["tool_choice"], "tool_choice", seen)
    elif body.get("function_call") is not None:
        legacy = body["function_call"]
        named = {"type": "function", "function": legacy} if isinstance(legacy, dict) else legacy
        choice = _choice(named, "function_call", seen)
    else:
        choice = None
    return ClientTools(definitions, choice)


def _tool(tool: object, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict):
        raise invalid_type(where, "an object", tool)
    kind = tool.get("type")
    if kind != "function":
        raise unsupported(
            f"{where}.type",
            f"Tools of type '{kind}' are not supported: only 'function' tools, which your "
            "client runs.",
        )
    return function_definition(tool.get("function"), f"{where}.function")


def function_definition(function: object, where: str) -> dict[str, Any]:
    """One function as the model is offered it, checked."""
    if not isinstance(function, dict):
        raise invalid_type(where, "an object", function)
    name = function.get("name")
    if not isinstance(name, str):
        raise invalid_type(f"{where}.name", "a string", name)
    if not TOOL_NAME.fullmatch(name):
        raise invalid(
            f"{where}.name",
            f"Invalid '{where}.name': string does not match pattern. Expected a string that "
            "matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.",
            code="invalid_value",
        )
    definition: dict[str, Any] = {"name": name}
    description = function.get("description")
    if description is not None:
        if not isinstance(description, str):
            raise invalid_type(f"{where}.description", "a string", description)
        definition["description"] = description
    parameters = function.get("parameters")
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise invalid_type(f"{where}.parameters", "an object", parameters)
        definition["parameters"] = parameters
    else:
        definition["parameters"] = {"type": "object", "properties": {}}
    strict = function.get("strict")
    if strict is not None:
        if not isinstance(strict, bool):
            raise invalid_type(f"{where}.strict", "a boolean", strict)
        definition["strict"] = strict
    return {"type": "function", "function": definition}


def _choice(choice: object, where: str, names: set[str]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        if choice not in CHOICES:
            allowed = ", ".join(f"'{one}'" for one in CHOICES)
            raise invalid(where, f"Invalid value: '{choice}'. Supported values are: {allowed}.")
        return choice
    if not isinstance(choice, dict) or choice.get("type") != "function":
        raise unsupported(where, f"'{where}' must be a string or a function to call.")
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise invalid_type(f"{where}.function.name", "a string", name)
    if name not in names:
        raise invalid(
            f"{where}.function.name",
            f"Invalid value: '{name}': the tool to call must be one of the request's tools.",
        )
    return {"type": "function", "function": {"name": name}}


def read_params(body: dict[str, Any], *, tools: bool) -> tuple[tuple[str, Any], ...]:
    """The generation parameters the client set that go to the model as they are."""
    params: list[tuple[str, Any]] = [(name, body[name]) for name in PASSED if body.get(name)]
    if body.get("top_logprobs") is not None and not body.get("logprobs"):
        raise invalid("top_logprobs", "'top_logprobs' needs 'logprobs' set to true.")
    for name in ("seed", "presence_penalty", "frequency_penalty"):
        if body.get(name) == 0:  # a zero is a value the client asked for too
            params.append((name, 0))
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, list):
            if len(stop) > MAX_STOP:
                raise invalid("stop", f"Invalid 'stop': at most {MAX_STOP} sequences.")
            for index, one in enumerate(stop):
                if not isinstance(one, str):
                    raise invalid_type(f"stop[{index}]", "a string", one)
        if stop:
            params.append(("stop", stop))
    response_format = _response_format(body.get("response_format"))
    if response_format is not None:
        params.append(("response_format", response_format))
    if tools and body.get("parallel_tool_calls") is not None:
        params.append(("parallel_tool_calls", body["parallel_tool_calls"]))
    return tuple(params)


def _response_format(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    kind = value.get("type")
    if kind not in RESPONSE_FORMATS:
        allowed = ", ".join(f"'{one}'" for one in RESPONSE_FORMATS)
        raise invalid(
            "response_format.type", f"Invalid value: '{kind}'. Supported values are: {allowed}."
        )
    if kind == "text":
        return None
    if kind == "json_schema":
        schema = value.get("json_schema")
        if not isinstance(schema, dict):
            raise invalid_type("response_format.json_schema", "an object", schema)
        if not isinstance(schema.get("name"), str):
            raise invalid_type("response_format.json_schema.name", "a string", schema.get("name"))
        if schema.get("schema") is not None and not isinstance(schema["schema"], dict):
            raise invalid_type("response_format.json_schema.schema", "an object", schema["schema"])
    return value
