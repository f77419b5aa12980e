"""The task API with DRF's client and the scripted model."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agent.job_functions import SWEEP_SCHEDULE, fail_dead_runs, run_queued_task
from sessions_app.models import Message, Run, Session
from tests.conftest import folder_of
from tests.llm_server import ScriptedLLM

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_settings")]

TASK_FIELDS = {
    "id",
    "status",
    "success",
    "text",
    "error",
    "iterations",
    "session",
    "tools_used",
    "usage",
    "created",
    "finished",
}


def test_health_needs_no_login(llm: ScriptedLLM) -> None:
    response = APIClient().get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["model"] == "openai/scripted"
    assert {"read_file", "write_file", "edit_file", "exec", "glob"} <= set(body["tools"])


def test_tools_lists_names_descriptions_and_schemas(api: APIClient) -> None:
    tools = {tool["name"]: tool for tool in api.get("/api/tools").json()}
    assert tools["read_file"]["parameters"]["required"] == ["path"]
    assert tools["exec"]["description"]
    assert APIClient().get("/api/tools").status_code == 401


def test_a_waited_task_runs_and_answers(api: APIClient, llm: ScriptedLLM, workspace) -> None:
    llm.tool_call("write_file", {"path": "hello.txt", "content": "Hello World"})
    llm.reply("Created hello.txt.")
    response = api.post("/api/tasks", {"prompt": "create hello.txt"}, format="json")

    assert response.status_code == 200
    task = response.json()
    assert set(task) >= TASK_FIELDS
    assert task["status"] == "succeeded" and task["success"] is True
    assert task["text"] == "Created hello.txt." and task["error"] is None
    assert task["iterations"] == 2 and task["tools_used"] == ["write_file"]
    assert task["session"].startswith("api:")
    assert set(task["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens", "cost"}
    assert task["usage"]["total_tokens"] > 0
    assert task["usage"]["cost"] is None  # the scripted model has no price
    assert task["finished"] is not None
    assert (folder_of(workspace, "ada") / "hello.txt").read_text() == "Hello World"
    assert api.get(f"/api/tasks/{task['id']}").json() == task


def test_a_session_carries_history_and_context_reaches_the_model(
    api: APIClient, llm: ScriptedLLM
) -> None:
    llm.reply("noted").reply("you said blue")
    first = api.post(
        "/api/tasks",
        {
            "prompt": "remember my colour",
            "context": "favourite colour: blue",
            "session": "api:mine",
        },
        format="json",
    ).json()
    second = api.post(
        "/api/tasks", {"prompt": "what colour?", "session": "api:mine"}, format="json"
    ).json()
    assert first["session"] == second["session"] == "api:mine"
    sent = llm.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "favourite colour: blue" in sent[1]["content"]


def test_a_queued_task_answers_at_once_and_the_worker_runs_it(
    api: APIClient, llm: ScriptedLLM
) -> None:
    llm.reply("done later")
    response = api.post("/api/tasks", {"prompt": "later please", "wait": False}, format="json")
    assert response.status_code == 202
    task = response.json()
    assert task["status"] == "queued" and task["success"] is False and task["text"] is None
    assert llm.requests == []

    assert run_queued_task(task["id"]) == "succeeded"
    done = api.get(f"/api/tasks/{task['id']}").json()
    assert done["status"] == "succeeded" and done["text"] == "done later"


def test_cancel_a_queued_task(api: APIClient, llm: ScriptedLLM) -> None:
    task = api.post("/api/tasks", {"prompt": "never mind", "wait": False}, format="json").json()
    cancelled = api.post(f"/api/tasks/{task['id']}/cancel").json()
    assert cancelled["status"] == "cancelled" and cancelled["finished"] is not None
    assert run_queued_task(task["id"]) == "cancelled"
    assert llm.requests == []


def test_the_sweep_of_dead_runs_is_scheduled_and_comes_back_when_deleted() -> None:
    from django.core.management import call_command
    from django.utils import timezone
    from django.utils.module_loading import import_string
    from django_q.models import Schedule

    Schedule.objects.filter(name=SWEEP_SCHEDULE).delete()  # as in the admin
    call_command("migrate", verbosity=0)  # as every deploy does
    (schedule,) = Schedule.objects.filter(name=SWEEP_SCHEDULE)
    assert import_string(schedule.func) is fail_dead_runs
    assert schedule.repeats == -1
    assert schedule.next_run - timezone.now() <= timedelta(seconds=20)  # well within a minute
    call_command("migrate", verbosity=0)
    assert Schedule.objects.filter(name=SWEEP_SCHEDULE).count() == 1


def test_a_task_whose_worker_vanished_is_failed(api: APIClient, ada: User) -> None:
    from datetime import timedelta

    from django.utils import timezone

    session = Session.objects.create(key="api:dead", channel="api", chat_id="dead", owner=ada)
    run = Run.objects.create(
        session=session,
        channel="api",
        prompt="x",
        status="running",
        last_alive=timezone.now() - timedelta(minutes=10),
    )
    assert api.get(f"/api/tasks/{run.pk}").json()["status"] == "running"
    assert fail_dead_runs() == 1  # the scheduled sweep
    task = api.get(f"/api/tasks/{run.pk}").json()
    assert task["status"] == "failed" and "stopped before it finished" in task["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "prompt"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "   "}, "prompt"),
        ({"prompt": "x" * 100_001}, "prompt"),
        ({"prompt": 42}, "prompt"),
        ({"prompt": "hi", "model": "gpt 4; rm -rf"}, "model"),
        ({"prompt": "hi", "session": "bad key with spaces"}, "session"),
        ({"prompt": "hi", "wait": "sometimes"}, "wait"),
        ({"prompt": "hi", "context": "x" * 100_001}, "context"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    api: APIClient, llm: ScriptedLLM, body: dict, field: str
) -> None:
    response = api.post("/api/tasks", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert llm.requests == [] and not Run.objects.exists()


@pytest.mark.parametrize(
    ("payload", "content_type"),
    [
        ("{not json", "application/json"),
        ("[1, 2]", "application/json"),
        ("prompt=hi", "text/plain"),
    ],
)
def test_bodies_that_are_not_a_json_object(api: APIClient, payload: str, content_type: str) -> None:
    response = api.post("/api/tasks", payload, content_type=content_type)
    assert response.status_code in (400, 415)
    assert response.json()


def test_without_a_model_the_api_says_how_to_set_one(api: APIClient, settings) -> None:
    settings.AGENT_MODEL = ""
    response = api.post("/api/tasks", {"prompt": "hi"}, format="json")
    assert response.status_code == 503
    assert "AGENT_MODEL" in response.json()["detail"]
    assert APIClient().get("/api/health").json()["model"] is None


def test_task_creation_is_throttled_per_user(api: APIClient, llm: ScriptedLLM, settings) -> None:
    settings.AGENT_TURN_RATE = "2/min"
    for _ in range(2):
        assert (
            api.post("/api/tasks", {"prompt": "hi", "wait": False}, format="json").status_code
            == 202
        )
    third = api.post("/api/tasks", {"prompt": "hi", "wait": False}, format="json")
    assert third.status_code == 429
    assert int(third["Retry-After"]) > 0
    assert api.get("/api/sessions").status_code == 200  # reading is not throttled


def test_model_failure_is_a_failed_task_not_a_server_error(
    api: APIClient, llm: ScriptedLLM
) -> None:
    llm.fault(401, body={"error": {"message": "bad key"}})
    task = api.post("/api/tasks", {"prompt": "hi"}, format="json").json()
    assert task["status"] == "failed" and task["success"] is False
    assert task["error"] == "the model provider did not accept the site's credentials"
    assert "bad key" not in task["text"]


def test_schema_and_docs(api: APIClient) -> None:
    schema = api.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {
        "/api/tasks",
        "/api/tasks/{task_id}",
        "/api/tasks/{task_id}/cancel",
        "/api/health",
    } <= set(paths)
    docs = api.get("/api/docs")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
    assert b"cdn" not in docs.content.lower()


def test_cancelling_a_running_task_ends_it_cleanly_and_keeps_its_counts(
    api: APIClient, ada: User, llm: ScriptedLLM
) -> None:
    import threading

    from agent.turn import execute_task

    llm.tool_call("exec", {"command": "sleep 30"})
    session = Session.objects.create(key="api:long", channel="api", chat_id="long", owner=ada)
    run = Run.objects.create(session=session, channel="api", prompt="a long job")
    worker = threading.Thread(target=execute_task, args=(run,), kwargs={"owner": ada})
    worker.start()
    deadline = time.monotonic() + 20
    while not Message.objects.filter(session=session, role="assistant").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)

    cancelled = api.post(f"/api/tasks/{run.pk}/cancel").json()
    worker.join(timeout=20)

    assert not worker.is_alive()  # execute_task returned instead of dying with CancelledError
    assert cancelled["status"] == "cancelled"
    assert cancelled["iterations"] == 1 and cancelled["tools_used"] == ["exec"]
    assert cancelled["usage"]["total_tokens"] > 0
    tool_results = Message.objects.filter(session=session, role="tool")
    assert tool_results.count() == 1


def test_slash_stop_through_the_api_cancels_queued_tasks_but_not_itself(
    api: APIClient, llm: ScriptedLLM
) -> None:
    queued = api.post(
        "/api/tasks", {"prompt": "later", "session": "api:q", "wait": False}, format="json"
    ).json()
    stop = api.post("/api/tasks", {"prompt": "/stop", "session": "api:q"}, format="json").json()
    assert stop["status"] == "succeeded" and stop["text"] == "Stopped 1 task."
    assert api.get(f"/api/tasks/{queued['id']}").json()["status"] == "cancelled"
    assert run_queued_task(queued["id"]) == "cancelled"
    again = api.post("/api/tasks", {"prompt": "/stop", "session": "api:q"}, format="json").json()
    assert again["text"] == "No running task to stop."
    assert llm.requests == []


@pytest.mark.parametrize(
    "key", ["cli:direct", "heartbeat", "cron:1", "web:" + "x" * 191, "api:", "api:has space"]
)
def test_only_api_and_web_sessions_are_reachable(api: APIClient, key: str) -> None:
    response = api.post("/api/tasks", {"prompt": "hi", "session": key}, format="json")
    assert response.status_code == 400 and "session" in response.json()


def test_prompt_and_context_together_are_limited(api: APIClient) -> None:
    body = {"prompt": "x" * 60_000, "context": "y" * 60_000}
    response = api.post("/api/tasks", body, format="json")
    assert response.status_code == 400 and "context" in response.json()


def test_new_archives_the_conversation_and_the_messages_say_so(
    api: APIClient, llm: ScriptedLLM
) -> None:
    llm.reply("noted")
    # /new archives the conversation into memory through the model first.
    llm.tool_call("save_memory", {"history_entry": "Asked to remember.", "memory_update": ""})
    llm.reply("fresh start")
    ask = {"session": "api:arc"}
    api.post("/api/tasks", {"prompt": "remember this", **ask}, format="json")
    new = api.post("/api/tasks", {"prompt": "/new", **ask}, format="json").json()
    assert "2 messages archived" in new["text"]
    api.post("/api/tasks", {"prompt": "hello again", **ask}, format="json")

    listed = api.get("/api/sessions/api:arc/messages").json()
    assert [(m["content"], m["archived"]) for m in listed] == [
        ("remember this", True),
        ("noted", True),
        ("hello again", False),
        ("fresh start", False),
    ]
    live = api.get("/api/sessions/api:arc/messages?archived=false").json()
    assert [m["content"] for m in live] == ["hello again", "fresh start"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/tasks/not-a-uuid",
        "/api/tasks/not-a-uuid/",
        "/api/tasks/not-a-uuid/cancel",
        "/api/tasks/12345678123456781234567812345678",  # a UUID, but not as the API writes one
        f"/api/tasks/{uuid.uuid4()}",
        f"/api/tasks/{uuid.uuid4()}/cancel",
    ],
)
def test_a_task_id_that_is_no_task_is_a_json_404(api: APIClient, path: str) -> None:
    response = api.post(path) if path.endswith("cancel") else api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) == {"detail"}


def test_another_users_task_is_a_404_and_stays_uncancelled(
    api: APIClient, llm: ScriptedLLM
) -> None:
    bob = User.objects.create_user("bob")
    session = Session.objects.create(key="api:b", channel="api", chat_id="b", owner=bob)
    run = Run.objects.create(session=session, channel="api", prompt="bob's")
    ownerless = Session.objects.create(key="cli:direct", channel="cli", chat_id="direct")
    cli_run = Run.objects.create(session=ownerless, channel="cli", prompt="local")
    for pk in (run.pk, cli_run.pk):
        assert api.get(f"/api/tasks/{pk}").status_code == 404
        assert api.post(f"/api/tasks/{pk}/cancel").status_code == 404
    run.refresh_from_db()
    assert run.cancel_requested is False


def test_the_schema_documents_the_message_pages(api: APIClient) -> None:
    schema = api.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"]["/api/sessions/{key}/messages"]["get"]
    assert {"cursor", "page_size", "archived"} <= {p["name"] for p in operation["parameters"]}
    page = operation["responses"]["200"]
    assert page["content"]["application/json"]["schema"]["type"] == "array"
    assert "Link" in page["headers"]
    assert "archived" in schema["components"]["schemas"]["MessageOut"]["properties"]
    task_id = schema["paths"]["/api/tasks/{task_id}"]["get"]["parameters"][0]
    assert task_id["schema"] == {"type": "string", "format": "uuid"}
