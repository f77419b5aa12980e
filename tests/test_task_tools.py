"""`"tools"` on `POST /api/tasks`: a direct generation (`false`), or a task limited to some
tools, which holds for a queued task and for the sub-agents it starts."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agent.job_functions import run_queued_task
from sessions_app.models import Run
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]


def tool_names(request: dict) -> list[str]:
    return sorted(tool["function"]["name"] for tool in request.get("tools") or [])


def test_false_is_one_direct_generation_with_no_tools_and_no_agent_prompt(
    api: APIClient, llm: ScriptedLLM
) -> None:
    llm.reply("Hi there.")
    response = api.post("/api/tasks", {"prompt": "say hi", "tools": False}, format="json")

    assert response.status_code == 200, response.json()
    task = response.json()
    assert task["text"] == "Hi there." and task["tools"] is False and task["iterations"] == 1
    (sent,) = llm.requests
    assert "tools" not in sent
    assert sent["messages"] == [{"role": "user", "content": "say hi"}]


def test_a_direct_generation_keeps_the_sessions_history(api: APIClient, llm: ScriptedLLM) -> None:
    llm.reply("noted").reply("blue")
    api.post("/api/tasks", {"prompt": "my colour is blue", "session": "api:c"}, format="json")
    api.post(
        "/api/tasks",
        {"prompt": "which colour?", "session": "api:c", "tools": False},
        format="json",
    )
    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == "which colour?"


def test_a_list_limits_the_tools_the_model_is_offered(
    api: APIClient, llm: ScriptedLLM, workspace
) -> None:
    llm.tool_call("exec", {"command": "echo no"}).reply("Could not.")
    body = {"prompt": "look", "tools": ["read_file", "list_dir"]}
    task = api.post("/api/tasks", body, format="json").json()

    assert task["tools"] == ["read_file", "list_dir"]
    assert tool_names(llm.requests[0]) == ["list_dir", "read_file"]
    assert "Tools: list_dir, read_file" in llm.requests[0]["messages"][0]["content"]
    # A tool it was not given is not run, whatever the model asks.
    result = llm.requests[1]["messages"][-1]
    assert result["role"] == "tool" and result["content"].startswith("Error")
    assert task["text"] == "Could not."


def test_an_empty_list_is_the_agent_without_tools(api: APIClient, llm: ScriptedLLM) -> None:
    llm.reply("Nothing to use.")
    task = api.post("/api/tasks", {"prompt": "go", "tools": []}, format="json").json()
    assert task["tools"] == [] and "tools" not in llm.requests[0]
    assert llm.requests[0]["messages"][0]["role"] == "system"


def test_a_queued_task_keeps_to_its_tools_in_the_worker(api: APIClient, llm: ScriptedLLM) -> None:
    llm.reply("later")
    body = {"prompt": "later", "tools": ["read_file"], "wait": False}
    task = api.post("/api/tasks", body, format="json").json()
    assert task["status"] == "queued" and task["tools"] == ["read_file"]

    assert run_queued_task(task["id"]) == "succeeded"
    assert tool_names(llm.requests[0]) == ["read_file"]


def test_a_sub_agent_gets_no_more_than_its_parents_tools(api: APIClient, llm: ScriptedLLM) -> None:
    llm.tool_call("subagent", {"task": "read it", "label": "reader"})
    llm.reply("the sub-agent's report")
    llm.reply("All read.")
    body = {"prompt": "delegate", "tools": ["subagent", "read_file"]}
    task = api.post("/api/tasks", body, format="json").json()

    assert task["text"] == "All read.", task
    parent, child, _ = llm.requests
    assert tool_names(parent) == ["read_file", "subagent"]
    assert tool_names(child) == ["read_file"]
    assert Run.objects.get(channel="subagent").tools == ["subagent", "read_file"]


def test_unknown_tools_are_a_400_naming_them_and_nothing_is_recorded(
    api: APIClient, llm: ScriptedLLM
) -> None:
    body = {"prompt": "go", "tools": ["read_file", "teleport", "fly"]}
    response = api.post("/api/tasks", body, format="json")

    assert response.status_code == 400
    (message,) = response.json()["tools"]
    assert "teleport" in message and "fly" in message and "read_file" not in message
    assert Run.objects.count() == 0 and llm.requests == []


@pytest.mark.parametrize("tools", ["exec", 0, {"exec": True}, [1], [""], ["x" * 201]])
def test_tools_of_another_type_are_a_400(api: APIClient, tools: object) -> None:
    response = api.post("/api/tasks", {"prompt": "go", "tools": tools}, format="json")
    assert response.status_code == 400 and "tools" in response.json()
    assert Run.objects.count() == 0


def test_true_and_null_mean_every_tool(api: APIClient, llm: ScriptedLLM) -> None:
    llm.reply("a").reply("b")
    for tools in (True, None):
        task = api.post("/api/tasks", {"prompt": "go", "tools": tools}, format="json").json()
        assert task["tools"] is None
    assert all("write_file" in tool_names(request) for request in llm.requests)
