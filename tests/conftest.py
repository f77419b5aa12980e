from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.db import connection

from agent.llm.client import LLM, LLMConfig, LLMResponse
from tests.llm_server import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
LOGIN = ("tester", "tester-pass-123")
# Set by .ci/run, which installs everything the sandbox's tests need (bubblewrap, slirp4netns,
# a tun device, the system's python3) and runs as root: there a test that would skip for a
# missing part fails instead, so that no defence goes untested unnoticed.
SANDBOX_REQUIRED = os.environ.get("AGENTSITE_TESTS_NEED_SANDBOX") == "1"


def needs(missing: bool, reason: str) -> pytest.MarkDecorator:
    """`skipif(missing)` on a developer's machine; where the sandbox is required, no skip:
    the test runs and fails on what is missing."""
    return pytest.mark.skipif(missing and not SANDBOX_REQUIRED, reason=reason)


def skip_for_missing(reason: str) -> None:
    """Skip a test for a part of the machine it lacks, or fail where it is required."""
    if SANDBOX_REQUIRED:
        pytest.fail(f"{reason} (.ci/run installs it; AGENTSITE_TESTS_NEED_SANDBOX is set)")
    pytest.skip(reason)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that drive Chromium are marked `browser`: those of the `*browser*` modules, and
    those that ask for a page of the browser (`test_browser.page`, `test_csp.page`)."""
    for item in items:
        module = item.path.name
        if "browser" in module or (module == "test_csp.py" and "page" in item.fixturenames):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True, scope="session")
def _close_worker_thread_connections(django_db_setup: None) -> Iterator[None]:
    """Async tests reach the database from asgiref's worker thread (and, on PostgreSQL,
    from the turn's database lanes), whose connections outlive them; close them so the
    test database can be dropped at the end."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)
    from agent.turn.db import lanes

    lanes.close_connections()


@pytest.fixture(autouse=True)
def _own_channel_layer() -> Iterator[None]:
    """Each test gets channel layer objects of its own. channels-redis binds its receive
    lock to the event loop that first waited on it; a receive that an earlier test's loop
    left behind would make every later test's socket fail with "bound to a different event
    loop"."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """Users made in this process hash their passwords cheaply: Django's default costs half
    a second per user by design, and the suite makes hundreds. Servers the tests start as
    processes of their own keep the real hasher."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _own_cache(settings: Any) -> None:
    """Each test counts turns against the rate limit from zero: a cache of its own, by key
    prefix, rather than a flush that would empty a shared Redis for everyone."""
    settings.CACHES = {
        name: {**config, "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
        for name, config in settings.CACHES.items()
    }


@pytest.fixture
def ada(db: None) -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_user("ada", password="pw-ada-123")


@pytest.fixture
def token(db: None) -> str:
    """A DRF token of `ada`, made for sockets (`?token=`) and API clients alike."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    user = User.objects.filter(username="ada").first() or User.objects.create_user(
        "ada", password="pw-ada-123"
    )
    return str(Token.objects.get_or_create(user=user)[0].key)


@pytest.fixture
def other_token(db: None) -> str:
    """A token of a second ordinary user, `bob`."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user("bob", password="pw-bob-123")
    return str(Token.objects.create(user=user).key)


@pytest.fixture
def api(ada: Any) -> Any:
    """A DRF client logged in as `ada`."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(ada)
    return client


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    """A scripted OpenAI-compatible model on 127.0.0.1."""
    from agent.llm.client import _limits

    # What an earlier test's server said of its window: a new server may get its port.
    _limits.clear()
    with ScriptedLLM() as server:
        yield server


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """As root, exec's sandbox runs as an account of its own, which must pass through the
    folders above its workspace. pytest's own temporary root is its user's alone, and every
    pytest that starts on the machine makes it so again; the suite's temporary folders go
    under a root of this run's instead (removed at its end), which `_sandbox_may_pass`
    opens."""
    if os.geteuid() == 0 and config.option.basetemp is None:
        config.option.basetemp = tempfile.mkdtemp(prefix="agentsite-tests-")
        config.stash[_OWN_BASETEMP] = Path(config.option.basetemp)


def pytest_unconfigure(config: pytest.Config) -> None:
    own = config.stash.get(_OWN_BASETEMP, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)


_OWN_BASETEMP = pytest.StashKey[Path]()


@pytest.fixture(autouse=True)
def _sandbox_may_pass(request: pytest.FixtureRequest) -> None:
    """A test's temporary folder and those above it, up to the run's root, may be passed
    through (not listed) by others, as root: see `pytest_configure`."""
    if os.geteuid() != 0 or "tmp_path" not in request.fixturenames:
        return
    tmp_path: Path = request.getfixturevalue("tmp_path")
    root = request.getfixturevalue("tmp_path_factory").getbasetemp()
    for folder in (tmp_path, *tmp_path.parents):
        folder.chmod(folder.stat().st_mode | 0o001)
        if folder == root:
            break


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def folder_of(workspace: Path, username: str | None = None) -> Path:
    """The folder a user's agent works in (turns of no account: their own), made."""
    from agent.tools.guards.folders import make_user_folder

    return make_user_folder(workspace, username)


@pytest.fixture
def ws(workspace: Path) -> Path:
    """The workspace, under the short name the tool tests use."""
    return workspace


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace that the fence must keep tools out of."""
    target = tmp_path / "outside"
    target.mkdir()
    (target / "secret.txt").write_text("top secret\n")
    return target


@pytest.fixture
def agent_settings(settings, llm: ScriptedLLM, workspace: Path, tmp_path: Path):
    """Django settings pointing the agent at the scripted model and a fresh workspace."""
    settings.AGENT_MODEL = "openai/scripted"
    settings.AGENT_API_BASE = llm.base_url
    settings.AGENT_API_KEY = "test-key"
    settings.AGENT_WORKSPACE = workspace
    settings.DATA_DIR = tmp_path / "data"
    settings.AGENT_LLM_TIMEOUT = 5.0
    settings.AGENT_LLM_MAX_RETRIES = 3
    settings.AGENT_LLM_RETRY_BUDGET = 10.0
    return settings


def _database_url() -> str | None:
    """The test database, when it is one another process can open (not in-memory SQLite)."""
    if connection.vendor != "postgresql":
        return None
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    auth = f"{s['USER']}{password}@" if s.get("USER") else ""
    return f"postgres://{auth}{s.get('HOST') or 'localhost'}:{s.get('PORT') or 5432}/{s['NAME']}"


def clean_env() -> dict[str, str]:
    """This process's environment without the settings a test process sets for itself, and
    a secret key, since a subprocess's data folder has none."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGENT_", "DJANGO_", "DATABASE_", "PYTEST_"))
    }
    env["DJANGO_SECRET_KEY"] = "a-test-only-secret-key-" + "x" * 40
    return env


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database made once; each test starts from a copy."""
    data = tmp_path_factory.mktemp("template")
    env = {**clean_env(), "AGENT_DATA_DIR": str(data)}
    command = [sys.executable, "manage.py", "migrate", "-v0"]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=120)
    return data / "db.sqlite3"


@pytest.fixture
def site_env(
    tmp_path: Path, workspace: Path, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> dict[str, str]:
    """The environment for a `manage.py` subprocess: scripted model, its own workspace, and
    the test database (PostgreSQL) or a migrated SQLite copy. Tests that use it need
    `django_db(transaction=True)` so that what they write is visible across processes."""
    env = clean_env()
    env.update(
        {
            "AGENT_MODEL": "openai/scripted",
            "AGENT_API_BASE": llm.base_url,
            "AGENT_API_KEY": "test-key",
            "AGENT_WORKSPACE": str(workspace),
            "AGENT_DATA_DIR": str(tmp_path / "data"),
            "AGENT_LLM_RETRY_BUDGET": "5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    url = _database_url()
    if url:
        env["DATABASE_URL"] = url
    else:
        (tmp_path / "data").mkdir()
        shutil.copy(request.getfixturevalue("migrated_sqlite"), tmp_path / "data" / "db.sqlite3")
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert process.poll() is None, f"{process.args} exited"
        assert time.monotonic() < deadline, f"{process.args} did not start"
        time.sleep(0.1)


@pytest.fixture(scope="session")
def login_password() -> str:
    """`LOGIN`'s password as the servers the tests start store it (their hasher is the
    default one, which takes its time by design): hashed once for the whole run."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    return hasher.encode(LOGIN[1], hasher.salt())


def off_the_loop(work: Callable[[], T]) -> T:
    """`work` (ORM calls) where Django allows them: at once, or, called from a coroutine, in
    a thread of its own whose connection is closed after it (the test database is dropped
    at the end of the run, which an open connection would refuse)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()

    def run() -> T:
        from django.db import connections

        try:
            return work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def add_login(site_env: dict[str, str], password: str) -> None:
    """What `manage.py ensure_login` does with `LOGIN` for the site of `site_env` (a
    superuser unless one exists), without a process of its own for it."""
    columns = {"username": LOGIN[0], "password": password, "is_superuser": True}
    columns.update(is_staff=True, is_active=True, email="", first_name="", last_name="")
    if "DATABASE_URL" in site_env:  # the test's own database, which the site shares
        from django.contrib.auth.models import User
        from django.utils import timezone

        def make() -> None:
            if not User.objects.filter(is_superuser=True).exists():
                User.objects.create(**columns, date_joined=timezone.now())

        off_the_loop(make)
        return
    with sqlite3.connect(Path(site_env["AGENT_DATA_DIR"]) / "db.sqlite3") as db:
        if db.execute("SELECT 1 FROM auth_user WHERE is_superuser").fetchone() is None:
            names = ", ".join([*columns, "date_joined"])
            marks = ", ".join("?" * (len(columns) + 1))
            now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
            db.execute(
                f"INSERT INTO auth_user ({names}) VALUES ({marks})", [*columns.values(), now]
            )


@pytest.fixture
def door(site_env: dict[str, str], request: pytest.FixtureRequest) -> str:
    """The site on a real daphne, with the environment of the test's parameter (given with
    `indirect=True`) over the scripted model's: the OpenAI door's tests."""
    site_env.update(getattr(request, "param", {}))
    return str(request.getfixturevalue("live_site"))


@pytest.fixture
def door_token(door: str, site_env: dict[str, str]) -> str:
    """An API token of `LOGIN`'s on `door`."""
    return login_token(site_env)


def login_token(site_env: dict[str, str]) -> str:
    """An API token of `LOGIN`'s in the site of `site_env`, as `manage.py drf_create_token`
    would make it, without a process of its own for it."""
    if "DATABASE_URL" in site_env:
        from django.contrib.auth.models import User
        from rest_framework.authtoken.models import Token

        def make() -> str:
            token, _ = Token.objects.get_or_create(user=User.objects.get(username=LOGIN[0]))
            return str(token.key)

        return off_the_loop(make)
    with sqlite3.connect(Path(site_env["AGENT_DATA_DIR"]) / "db.sqlite3") as db:
        (user,) = db.execute("SELECT id FROM auth_user WHERE username = ?", [LOGIN[0]]).fetchone()
        known = db.execute("SELECT key FROM authtoken_token WHERE user_id = ?", [user]).fetchone()
        if known is not None:
            return str(known[0])
        key = secrets.token_hex(20)
        now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        db.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (?, ?, ?)", [key, now, user]
        )
        return key


@pytest.fixture
def live_site(site_env: dict[str, str], login_password: str) -> Iterator[str]:
    """The site served by a real daphne process, with the login `LOGIN`; its base URL."""
    add_login(site_env, login_password)
    port = free_port()
    command = [sys.executable, "-m", "agentsite.web", "-v", "0", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen([*command, "agentsite.asgi:application"], cwd=ROOT, env=site_env)
    try:
        wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh Python process with `env`, from the project's folder."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run `manage.py` with `env` and no input; whatever became of it."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def manage(env: dict[str, str], *args: str) -> str:
    """Run `manage.py` with `env`; its standard output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


@pytest.fixture(params=["auto", "litellm"], ids=["lean", "litellm"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_llm(server: ScriptedLLM, backend: str = "auto", **overrides: object) -> LLM:
    """An adapter pointed at the scripted `server`, the lean path unless `backend`."""
    options: dict[str, object] = {
        "backend": backend,
        "model": "openai/scripted",
        "api_base": server.base_url,
        "api_key": "test-key",
        "timeout": 5.0,
        "max_retries": 3,
        "retry_budget": 10.0,
    }
    options.update(overrides)
    return LLM(LLMConfig(**options))  # type: ignore[arg-type]


async def stream_pieces(
    server: ScriptedLLM, backend: str, content: str
) -> tuple[LLMResponse, list[str], list[str]]:
    """The model's streamed answer to the user's `content`, with the pieces of its text and
    of its reasoning as they were handed on."""
    pieces: list[str] = []
    thoughts: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    async def on_reasoning(piece: str) -> None:
        thoughts.append(piece)

    response = await make_llm(server, backend).stream(
        [{"role": "user", "content": content}], on_text=on_text, on_reasoning=on_reasoning
    )
    return response, pieces, thoughts
