"""The task API over real HTTP: the queued path through a real django-q2 worker, and
schemathesis exploring the whole OpenAPI document. A task whose worker is killed is in
`test_background_live.py`, with the other work of the cluster's scheduler."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import ROOT, login_token
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(live_site: str, site_env: dict[str, str]) -> str:
    return login_token(site_env)


def test_a_queued_task_runs_in_a_real_worker(
    live_site: str, site_env: dict[str, str], token: str, llm: ScriptedLLM
) -> None:
    llm.tool_call("write_file", {"path": "report.txt", "content": "queued"}).reply("Filed.")
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=30) as client:
        queued = client.post("/api/tasks", json={"prompt": "file a report", "wait": False})
        assert queued.status_code == 202, queued.text
        task = queued.json()
        assert task["status"] == "queued"

        worker = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=site_env)
        try:
            deadline = time.monotonic() + 60
            while task["status"] in ("queued", "running"):
                assert time.monotonic() < deadline, f"the worker never finished: {task}"
                time.sleep(0.3)
                task = client.get(f"/api/tasks/{task['id']}").json()
        finally:
            worker.terminate()
            worker.wait(timeout=30)

    assert task["status"] == "succeeded", task
    assert task["text"] == "Filed." and task["tools_used"] == ["write_file"]


# Every operation of the API, generated requests each: minutes, not seconds, on a loaded
# two-core machine running the suite twice side by side.
@pytest.mark.timeout(360)
def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    live_site: str, token: str, tmp_path
) -> None:
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{live_site}/api/schema",
        "--header",
        f"Authorization: Token {token}",
        "--checks",
        "not_a_server_error,status_code_conformance,response_schema_conformance,"
        "content_type_conformance,response_headers_conformance",
        # Every operation, each with this many generated requests: enough to find the
        # kinds of answers the schema does not describe, within a minute or two on either
        # database.
        "--max-examples",
        "10",
        "--seed",
        "1",
        "--request-timeout",
        "30",
        "--suppress-health-check",
        "all",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
