"""A worker's task, whose event loop closes when it returns, still gets its last events to
the sockets through a Redis that falters as the task ends, and says which it could not.

Each test has a Redis server of its own, since pausing one or taking its permissions away
would hold up everything else that uses it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.layers import channel_layers, get_channel_layer
from django.db import connections

from agent.job_functions import run_queued_task
from agent.turn import fanout, session_group
from sessions_app import runs as run_records
from sessions_app import services
from sessions_app.models import Run
from tests.conftest import free_port, wait_for_port
from tests.llm_server import ScriptedLLM
from tests.test_fanout import until_subscribed

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("agent_settings"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

ANSWER = "The task's last word."


@pytest.fixture
def own_redis() -> Iterator[redis.Redis]:
    """A Redis server for this test alone; a client of it."""
    port = free_port()
    # No snapshot, no append-only file: nothing of it outlives the test.
    command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    server = subprocess.Popen([*command, "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, server)
        with redis.Redis(port=port) as client:
            yield client
    finally:
        server.terminate()
        server.wait(timeout=10)


def use_layer(settings: Any, port: int) -> None:
    """The Redis channel layer, as the site configures it, on `port`."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": f"redis://127.0.0.1:{port}", "socket_timeout": None}]},
        }
    }
    channel_layers.backends.clear()


def queued_run(ada: Any) -> Run:
    session = services.get_or_create_session(key="api:worker", owner=ada)
    return run_records.queue_run(session=session, channel="api", prompt="finish up", model="")


def as_worker(run: Run) -> str:
    """The worker's task for the run, from a thread with no event loop, as django-q2 runs
    it: its coroutines run on a loop of their own that closes when it returns."""
    try:
        return run_queued_task(str(run.pk))
    finally:
        connections.close_all()


async def until(condition: Any, what: str, timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not await sync_to_async(condition)():
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("falter", ["refuses", "pauses"])
async def test_a_tasks_last_events_reach_the_sockets_when_redis_falters_as_it_ends(
    falter: str,
    own_redis: redis.Redis,
    settings: Any,
    llm: ScriptedLLM,
    ada: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_layer(settings, own_redis.connection_pool.connection_kwargs["port"])
    # The turn waits this long for a send before it goes on, and ends well before Redis
    # takes its events again.
    monkeypatch.setattr(fanout, "PUBLISH_WAIT", 0.1)
    monkeypatch.setattr(fanout, "RETRY_DELAYS", (0.05, 0.1))
    run = await sync_to_async(queued_run)(ada)
    layer = get_channel_layer()
    socket = await layer.new_channel()
    group = session_group(run.session_id)
    await layer.group_add(group, socket)
    await until_subscribed(layer, group, socket)
    llm.reply(ANSWER, delay=0.3)

    task = asyncio.create_task(asyncio.to_thread(as_worker, run))
    await until(lambda: len(llm.requests) >= 1, "the model call")
    if falter == "refuses":  # every publish fails at once, until it may again
        own_redis.execute_command("ACL", "SETUSER", "default", "-publish")
    else:  # every command waits
        own_redis.client_pause(2000)
    await until(lambda: Run.objects.get(pk=run.pk).status == Run.Status.SUCCEEDED, "the turn's end")
    await asyncio.sleep(0.5)  # the loop of an old worker's task would be gone by now
    if falter == "refuses":
        own_redis.execute_command("ACL", "SETUSER", "default", "+publish")

    frames = []
    async with asyncio.timeout(10):
        while not any(f.get("role") == "assistant" for f in frames):
            message = await layer.receive(socket)
            if message["type"] == fanout.HANDLER:
                frames.append(message["frame"])
    assert await task == Run.Status.SUCCEEDED
    assert frames[-1]["content"] == ANSWER, json.dumps(frames)
    assert frames[0]["type"] == "thinking_started"


async def test_events_redis_never_took_are_logged_as_errors_when_the_task_ends(
    settings: Any,
    llm: ScriptedLLM,
    ada: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    use_layer(settings, free_port())  # no Redis listens there
    monkeypatch.setattr(fanout, "PUBLISH_WAIT", 0.1)
    monkeypatch.setattr(fanout, "RETRY_DELAYS", (0.05,))
    monkeypatch.setattr(fanout, "DRAIN_WAIT", 1.0, raising=False)
    run = await sync_to_async(queued_run)(ada)
    llm.reply(ANSWER)

    with caplog.at_level(logging.ERROR, logger="agent.turn.fanout"):
        status = await asyncio.to_thread(as_worker, run)

    assert status == Run.Status.SUCCEEDED  # the turn itself does not depend on Redis
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and r.name == fanout.__name__]
    assert len(errors) == 1, caplog.text
    logged = errors[0].getMessage()
    assert logged.startswith(f"run {run.pk}: ")
    assert "4 event(s) never reached the sockets" in logged
    # Down to the answer, the last of them.
    assert logged.endswith(
        f"thinking_started for session {run.session_id}, message for session {run.session_id}"
        f" (x2), thinking_finished for session {run.session_id}"
    )
