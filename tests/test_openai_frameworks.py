"""Frameworks as clients of the OpenAI door on a real daphne: litellm with tools, and
LangChain's `ChatOpenAI` with `bind_tools` and `with_structured_output`."""

from __future__ import annotations

import json
from typing import Any

import litellm
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city, now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_litellm_calls_the_clients_tool_and_goes_on_with_its_result(
    door: str, door_token: str, llm: ScriptedLLM
) -> None:
    llm.tool_call("get_weather", {"city": "Rome"}).reply("Rome is warm.")
    where = {"api_base": f"{door}/v1", "api_key": door_token, "num_retries": 0}
    ask = [{"role": "user", "content": "Weather in Rome?"}]
    first = litellm.completion(model="openai/agentsite", messages=ask, tools=[WEATHER], **where)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Rome"},
    )
    follow_up = [
        *ask,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "warm"},
    ]
    chunks = litellm.completion(
        model="openai/agentsite", messages=follow_up, tools=[WEATHER], stream=True, **where
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert text == "Rome is warm."


@tool
def get_weather(city: str) -> str:
    """The weather in a city, now."""
    return f"warm in {city}"


class Place(BaseModel):
    city: str
    country: str


def test_langchain_binds_tools_and_asks_for_structured_output(
    door: str, door_token: str, llm: ScriptedLLM
) -> None:
    model = ChatOpenAI(model="agentsite", base_url=f"{door}/v1", api_key=door_token, max_retries=0)
    llm.tool_call("get_weather", {"city": "Lima"}).reply("Lima is warm.")
    asked = [HumanMessage("Weather in Lima?")]
    answer = model.bind_tools([get_weather]).invoke(asked)
    assert [(c["name"], c["args"]) for c in answer.tool_calls] == [
        ("get_weather", {"city": "Lima"})
    ]
    call = answer.tool_calls[0]
    result = get_weather.invoke(call["args"])
    final = model.bind_tools([get_weather]).invoke(
        [*asked, answer, ToolMessage(result, tool_call_id=call["id"])]
    )
    assert final.content == "Lima is warm."
    assert llm.requests[1]["messages"][-1]["content"] == "warm in Lima"

    llm.reply(json.dumps({"city": "Lima", "country": "Peru"}))
    place = model.with_structured_output(Place).invoke("Where is Lima?")
    assert place == Place(city="Lima", country="Peru")
    form = llm.requests[2]["response_format"]
    assert form["type"] == "json_schema" and form["json_schema"]["name"] == "Place"
