"""What the site shows when something goes wrong, and what it leaves behind when it stops:
errors under /api/ are JSON, other error pages are the site's own plain pages, the API's
description needs a login, static files are served with DEBUG off, and `manage.py serve`
refuses a taken port and stops every process it started."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from agentsite import urls
from tests.conftest import ROOT, free_port, login_token, run_manage, wait_for_port

pytestmark = pytest.mark.django_db(transaction=True)

FIVE_MB = 5 * 1024 * 1024
THREE_MB = 3 * 1024 * 1024
# What a page may not show of the server.
LEAKS = ("SECRET_KEY", "settings", "Traceback", str(ROOT), "DATABASES", "URLconf")
UNKNOWN_API_PATHS = ["/api/nope", "/api/nope/", "/api/tasks/x/y", "/api/", "/api/sessions/a/b/c"]


def assert_tells_nothing(body: str) -> None:
    for leak in LEAKS:
        assert leak not in body, f"the page shows {leak!r}"


def assert_site_page(response, status: int) -> None:
    """A page of the site (its look, its stylesheet), not Django's bare or technical one."""
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert "brand-name" in body and "/static/chat/base.css" in body
    assert_tells_nothing(body)


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert isinstance(body, dict) and body["detail"]
    assert_tells_nothing(response.content.decode())
    return body


@pytest.fixture(params=[False, True], ids=["debug-off", "debug-on"])
def debug(request: pytest.FixtureRequest, settings) -> bool:
    settings.DEBUG = request.param
    return bool(request.param)


@pytest.fixture
def browser(ada: User) -> Client:
    """A logged-in browser that gets the server's error pages rather than its exceptions."""
    client = Client(raise_request_exception=False)
    client.force_login(ada)
    return client


# ---- /api/: JSON, whatever DEBUG says ------------------------------------------------------


def test_a_body_over_the_upload_limit_is_a_json_400(
    api: APIClient, debug: bool, caplog: pytest.LogCaptureFixture
) -> None:
    body = json.dumps({"prompt": "x" * FIVE_MB})
    with caplog.at_level(logging.WARNING, logger="agent.doors.api.error_responses"):
        response = api.post("/api/tasks", body, content_type="application/json")
    detail = assert_json_error(response, 400)["detail"]
    assert "too large" in detail
    # A client's mistake, not a server failure: no traceback in the log.
    assert not [
        r for r in caplog.records if r.name == "agent.doors.api.error_responses" and r.exc_info
    ]


@pytest.mark.parametrize("path", UNKNOWN_API_PATHS)
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_an_unknown_api_path_is_a_json_404(path: str, method: str, debug: bool, ada: User) -> None:
    signed_in = APIClient()
    signed_in.force_authenticate(ada)
    for client in (APIClient(), signed_in):
        response = getattr(client, method)(path)
        assert assert_json_error(response, 404) == {"detail": "Not found."}


def test_an_unknown_api_path_takes_no_csrf_check(ada: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    assert_json_error(client.post("/api/nope", {"x": "1"}), 404)


def test_an_unexpected_error_in_an_api_view_is_a_json_500_logged_whole(
    api: APIClient, debug: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(conf: object) -> None:
        raise RuntimeError(f"internal detail at {ROOT}/agent/secret.py")

    monkeypatch.setattr("agent.doors.api.site_views.offered_tools", broken)
    with caplog.at_level(logging.ERROR, logger="agent.doors.api.error_responses"):
        response = api.get("/api/tools")
    assert assert_json_error(response, 500) == {"detail": "Internal server error."}
    assert b"internal detail" not in response.content
    logged = [
        r for r in caplog.records if r.name == "agent.doors.api.error_responses" and r.exc_info
    ]
    assert logged and "internal detail" in str(logged[0].exc_info[1])


def test_the_site_handlers_answer_json_under_api() -> None:
    """Errors Django itself turns into answers (raised outside a view) under /api/."""
    from django.core.exceptions import PermissionDenied, RequestDataTooBig
    from django.http import Http404

    request = RequestFactory().post("/api/tasks")
    for handler, exc, status in [
        (urls.handler400, RequestDataTooBig("big"), 400),
        (urls.handler403, PermissionDenied("no"), 403),
        (urls.handler404, Http404("none"), 404),
    ]:
        assert_json_error(handler(request, exc), status)
    too_large = json.loads(urls.handler400(request, RequestDataTooBig()).content)
    assert "too large" in too_large["detail"]
    assert_json_error(urls.handler500(request), 500)


# ---- elsewhere: the site's plain pages -----------------------------------------------------


def test_a_form_over_the_upload_limit_is_a_plain_400_page(db: None) -> None:
    response = Client(raise_request_exception=False).post(
        "/accounts/login/", {"username": "ada", "password": "x" * THREE_MB}
    )
    assert_site_page(response, 400)


def test_an_unknown_page_is_a_plain_404_page(browser: Client) -> None:
    assert_site_page(browser.get("/nope"), 404)
    assert_site_page(browser.get("/c/not a chat id!/"), 404)  # Http404 raised by a view
    assert_site_page(browser.get("/static/chat/nope.js"), 404)


def test_a_server_error_is_a_plain_500_page(
    browser: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(user: object) -> None:
        raise RuntimeError("internal detail")

    monkeypatch.setattr("agent.doors.pages.settings_for", broken)
    response = browser.get("/")
    assert_site_page(response, 500)
    assert b"internal detail" not in response.content


def test_a_forbidden_page_is_a_plain_403_page() -> None:
    from django.core.exceptions import PermissionDenied

    assert_site_page(urls.handler403(RequestFactory().get("/admin/"), PermissionDenied()), 403)


def test_a_csrf_failure_is_a_plain_403_page(db: None) -> None:
    response = Client(enforce_csrf_checks=True).post(
        "/accounts/login/", {"username": "ada", "password": "x"}
    )
    assert_site_page(response, 403)


# ---- the API's description needs a login ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "accept"),
    [
        ("/api/schema", "*/*"),
        ("/api/schema/", "application/vnd.oai.openapi+json"),
        ("/api/docs", "text/html"),
        ("/api/docs/", "*/*"),
    ],
)
def test_the_schema_and_docs_need_a_login(path: str, accept: str, api: APIClient) -> None:
    anonymous = APIClient().get(path, HTTP_ACCEPT=accept)
    assert_json_error(anonymous, 401)
    assert api.get(path, HTTP_ACCEPT=accept).status_code == 200
    assert APIClient().get("/api/health").status_code == 200


# ---- a real daphne, DEBUG off ---------------------------------------------------------------


def test_live_api_errors_are_json(live_site: str, site_env: dict[str, str]) -> None:
    token = login_token(site_env)
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=live_site, headers=headers, timeout=30) as client:
        body = json.dumps({"prompt": "x" * FIVE_MB})
        big = client.post("/api/tasks", content=body, headers={"Content-Type": "application/json"})
        assert big.status_code == 400, big.text[:500]
        assert big.headers["content-type"].startswith("application/json")
        assert "too large" in big.json()["detail"]
        for path in ("/api/nope", "/api/tasks/x/y"):
            missing = client.get(path)
            assert missing.status_code == 404
            assert missing.json() == {"detail": "Not found."}
        anonymous = httpx.get(f"{live_site}/api/schema", timeout=30)
        assert anonymous.status_code in (401, 403)
        assert client.get("/api/schema").status_code == 200


def test_live_pages_and_static_files(live_site: str) -> None:
    with httpx.Client(base_url=live_site, timeout=30) as client:
        script = client.get("/static/chat/chat.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]

        login = client.get("/accounts/login/")
        assert login.status_code == 200
        stylesheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', login.text)
        assert stylesheets, login.text[:500]
        sheets = [client.get(href) for href in stylesheets]
        for css in sheets:
            assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert any(".auth-card" in css.text for css in sheets)

        # The login page set the CSRF cookie, so the check reads the oversized form itself.
        token = client.cookies["csrftoken"]
        big = client.post(
            "/accounts/login/",
            data={"csrfmiddlewaretoken": token, "username": "x", "password": "x" * THREE_MB},
        )
        for page, status in [(big, 400), (client.get("/nope"), 404)]:
            assert page.status_code == status
            assert page.headers["content-type"].startswith("text/html")
            assert "brand-name" in page.text
            assert_tells_nothing(page.text)


# ---- manage.py serve ------------------------------------------------------------------------

MARK = "SERVE_TEST_MARK"

needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")


def marked_processes(mark: str) -> dict[int, str]:
    """Running processes (not zombies) whose environment carries `mark`: their command
    lines by pid. Every process `serve` starts inherits its environment."""
    needle = f"{MARK}={mark}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def wait_until(condition, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message()
        time.sleep(0.2)


@pytest.fixture
def serve_env(site_env: dict[str, str]) -> Iterator[tuple[dict[str, str], str]]:
    """`site_env` with a mark of its own; whatever still carries it afterwards is killed."""
    mark = uuid.uuid4().hex
    yield {**site_env, MARK: mark}, mark
    for pid in marked_processes(mark):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start_serve(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """`manage.py serve` on `port`, its output (and its children's) in `log`: a pipe would
    fill up and stall them, or stay open as long as any of them lives."""
    command = [sys.executable, "manage.py", "serve", "--port", str(port)]
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_for_worker(serve: subprocess.Popen[bytes], port: int, mark: str) -> None:
    """Until daphne answers and the worker has started its own processes."""
    wait_for_port(port, serve)

    def workers() -> list[int]:
        return [pid for pid, cmd in marked_processes(mark).items() if "qcluster" in cmd]

    wait_until(lambda: len(workers()) >= 3, 60, lambda: f"no worker: {marked_processes(mark)}")


@needs_proc
def test_serve_refuses_a_taken_port_at_once(serve_env: tuple[dict[str, str], str]) -> None:
    env, mark = serve_env
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        elapsed = time.monotonic() - started
        survivors = marked_processes(mark)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(port) in lines[0], done.stderr
    assert "Serving" not in done.stdout
    assert elapsed < 30
    assert not survivors, survivors


@pytest.fixture
def serving(
    serve_env: tuple[dict[str, str], str], tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """`manage.py serve` with its worker up: the process, its mark and its log."""
    env, mark = serve_env
    port = free_port()
    log = tmp_path / "serve.log"
    serve = start_serve(env, port, log)
    try:
        wait_for_worker(serve, port, mark)
        yield serve, mark, log
    finally:
        if serve.poll() is None:
            serve.kill()


@needs_proc
def test_serve_stops_every_process_it_started_on_sigterm(
    serving: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    serve, mark, log = serving
    assert any("agentsite.web" in cmd for cmd in marked_processes(mark).values())
    serve.send_signal(signal.SIGTERM)
    serve.wait(timeout=60)
    wait_until(lambda: not marked_processes(mark), 15, lambda: f"left: {marked_processes(mark)}")
    assert serve.returncode == 0, log.read_text()[-4000:]
    # Each stopped in order when asked, without waiting out the grace period for SIGKILL.
    assert "did not stop" not in log.read_text()


@needs_proc
def test_serve_stops_the_workers_processes_when_the_worker_dies(
    serving: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    serve, mark, log = serving
    # The worker serve started leads its own process group; kill it alone, as a crash
    # would, leaving its processes to whoever stops the group.
    [leader] = [
        pid
        for pid, cmd in marked_processes(mark).items()
        if "qcluster" in cmd and os.getpgid(pid) == pid
    ]
    os.kill(leader, signal.SIGKILL)
    serve.wait(timeout=60)
    wait_until(lambda: not marked_processes(mark), 15, lambda: f"left: {marked_processes(mark)}")
    assert serve.returncode != 0, log.read_text()[-4000:]


def test_serve_beyond_this_machine_needs_the_names_the_site_answers_to(
    site_env: dict[str, str],
) -> None:
    done = run_manage(site_env, "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert done.returncode != 0
    assert "needs DJANGO_ALLOWED_HOSTS" in done.stderr and "Traceback" not in done.stderr
    assert "Serving" not in done.stdout
