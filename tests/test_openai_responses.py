"""The Responses API on a real daphne, with the `openai` SDK (create, stream, retrieve,
`previous_response_id`) and the OpenAI Agents SDK with its default settings (a function
tool, a handoff, structured output), streamed and not."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from pydantic import BaseModel

from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city, now.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


@pytest.fixture
def client(door: str, door_token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{door}/v1", api_key=door_token, max_retries=0)


def test_a_tool_turn_continued_by_the_previous_response(
    client: openai.OpenAI, llm: ScriptedLLM
) -> None:
    llm.tool_call("get_weather", {"city": "Paris"}).reply("Sunny in Paris.")
    first = client.responses.create(
        model="agentsite",
        input="What is the weather in Paris?",
        instructions="Answer in one sentence.",
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert first.status == "completed" and first.id.startswith("resp_")
    [call] = [item for item in first.output if item.type == "function_call"]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    sent = llm.requests[0]
    assert "get_weather" in [tool["function"]["name"] for tool in sent["tools"]]
    assert "Answer in one sentence." in sent["messages"][0]["content"]

    second = client.responses.create(
        model="agentsite",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text == "Sunny in Paris."
    assert second.previous_response_id == first.id
    continued = llm.requests[1]["messages"]
    assert continued[-1]["role"] == "tool" and continued[-1]["content"] == "sunny"
    assert continued[-1]["tool_call_id"] == call.call_id
    assert continued[-3]["content"].endswith("What is the weather in Paris?")

    # A new message continues the conversation kept on the server.
    llm.reply("You asked about Paris.")
    third = client.responses.create(
        model="agentsite", previous_response_id=second.id, input="What did I ask?"
    )
    assert third.output_text == "You asked about Paris."
    said = [m.get("content") for m in llm.requests[2]["messages"]]
    assert "Sunny in Paris." in said

    again = client.responses.retrieve(second.id)
    assert again.output_text == "Sunny in Paris." and again.id == second.id
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="agentsite", previous_response_id="resp_nope", input="hi")
    assert refused.value.code == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_nope")


def test_a_stream_of_the_agents_progress_and_its_answer(
    client: openai.OpenAI, llm: ScriptedLLM
) -> None:
    llm.tool_call("list_dir", {"path": "."}, text="Let me look.").reply("Your folder is empty.")
    with client.responses.stream(model="agentsite", input="What is in my folder?") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert "response.reasoning_summary_text.delta" in kinds
    types = [item.type for item in final.output]
    assert types == ["message", "reasoning", "message"]
    reasoning = final.output[1]
    assert "list_dir" in reasoning.summary[0].text  # type: ignore[union-attr]
    assert final.output_text.endswith("Your folder is empty.")
    assert final.usage is not None and final.usage.total_tokens > 0

    # A call of the client's tool, streamed.
    llm.tool_call("get_weather", {"city": "Oslo"})
    events = list(
        client.responses.create(
            model="agentsite-plain",
            input="Weather in Oslo?",
            tools=[WEATHER],
            stream=True,  # type: ignore[list-item]
        )
    )
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [json.loads(e.arguments) for e in done] == [{"city": "Oslo"}]
    assert events[-1].type == "response.completed"


class Report(BaseModel):
    city: str
    summary: str


@function_tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"Sunny in {city}, 21 C"


def agents_turn(door: str, door_token: str, *, streamed: bool) -> Any:
    client = openai.AsyncOpenAI(base_url=f"{door}/v1", api_key=door_token, max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    set_tracing_disabled(True)
    reporter = Agent(
        name="Reporter",
        instructions="Write the report.",
        model="agentsite",
        output_type=Report,
    )
    triage = Agent(
        name="Triage",
        instructions="Find the weather, then hand over to the Reporter.",
        model="agentsite",
        tools=[get_weather],
        handoffs=[reporter],
    )

    async def run() -> Any:
        if not streamed:
            return await Runner.run(triage, "What is the weather in Paris?")
        result = Runner.run_streamed(triage, "What is the weather in Paris?")
        async for _ in result.stream_events():
            pass
        return result

    return asyncio.run(run())


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_the_agents_sdk_with_its_defaults(
    door: str, door_token: str, llm: ScriptedLLM, streamed: bool
) -> None:
    llm.tool_call("get_weather", {"city": "Paris"})
    llm.tool_call("transfer_to_reporter", {})
    llm.reply(json.dumps({"city": "Paris", "summary": "Sunny, 21 C"}))
    result = agents_turn(door, door_token, streamed=streamed)
    assert result.final_output == Report(city="Paris", summary="Sunny, 21 C")
    assert result.last_agent.name == "Reporter"
    # The SDK ran its tool and handed over; each request went on with the turn.
    results = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in results] == ["Sunny in Paris, 21 C"]
    last = llm.requests[2]
    assert last["response_format"]["type"] == "json_schema"
    assert "Write the report." in last["messages"][0]["content"]
    assert len(llm.requests) == 3
