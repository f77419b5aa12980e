"""Runs exported as OpenTelemetry spans: a command-line turn, a real subprocess, sends its
spans over OTLP/HTTP to a collector this test runs on 127.0.0.1, which decodes them with
the protocol's own classes and checks their names, parents and GenAI attributes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# The development group installs them with the SDK and its exporter (`make install`).
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.conftest import ROOT
from tests.llm_server import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)


class Collector:
    """An OTLP/HTTP trace receiver: every span posted to /v1/traces, decoded, with the
    service name of its resource."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Span]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                with collector.lock:
                    collector.paths.append(self.path)
                    collector.headers.append(dict(self.headers))
                    for resource_spans in request.resource_spans:
                        service = attributes(resource_spans.resource)["service.name"]
                        for scope_spans in resource_spans.scope_spans:
                            collector.spans += [(service, span) for span in scope_spans.spans]
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        return Handler

    def wait_for(self, count: int, timeout: float = 30) -> list[tuple[str, Span]]:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            assert time.monotonic() < deadline, f"only {len(self.spans)} spans arrived"
            time.sleep(0.05)


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def attributes(item: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in item.attributes:
        value = pair.value
        found[pair.key] = getattr(value, value.WhichOneof("value"))
    return found


def test_a_command_line_turn_exports_its_run_model_calls_and_tool_calls(
    site_env: dict[str, str], llm: ScriptedLLM, collector: Collector
) -> None:
    llm.tool_call("subagent", {"task": "Read the notes", "label": "reader"})
    llm.tool_call("read_file", {"path": "missing.txt"})  # the sub-agent's, which fails
    llm.reply("There are no notes.")  # the sub-agent's answer
    llm.tool_call("write_file", {"path": "notes.txt", "content": "new"})
    llm.reply("Wrote notes.txt.")
    env = {
        **site_env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-key=abc%20123",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "agent", "-m", "read my notes, then write new ones"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Wrote notes.txt."

    received = collector.wait_for(10)
    assert {service for service, _ in received} == {"agentsite"}
    assert set(collector.paths) == {"/v1/traces"}
    assert all(h.get("x-collector-key") == "abc 123" for h in collector.headers)
    spans = [span for _, span in received]
    runs = [s for s in spans if s.name == "invoke_agent agentsite"]
    assert len(runs) == 2 and len(spans) == 10
    parent, child = sorted(runs, key=lambda s: attributes(s)["agentsite.channel"] == "subagent")
    assert attributes(child)["agentsite.channel"] == "subagent"

    # The turn's run is a root; the sub-agent's run is its child, in the same trace.
    assert parent.parent_span_id == b"" and child.parent_span_id == parent.span_id
    assert {s.trace_id for s in spans} == {parent.trace_id}
    for run in runs:
        run_attributes = attributes(run)
        assert run_attributes["gen_ai.operation.name"] == "invoke_agent"
        assert run_attributes["gen_ai.agent.name"] == "agentsite"
        assert run_attributes["gen_ai.request.model"] == "scripted"
        assert run_attributes["gen_ai.provider.name"] == "openai"
        assert run_attributes["gen_ai.usage.input_tokens"] > 0
        assert run.status.code == Status.STATUS_CODE_UNSET
    assert attributes(child)["agentsite.parent_run.id"] == attributes(parent)["agentsite.run.id"]
    # The run's span id and trace id are its id's: the database's run and the span match.
    run_id = attributes(parent)["agentsite.run.id"].replace("-", "")
    assert parent.trace_id.hex() == run_id and parent.span_id.hex() == run_id[16:]

    def calls_of(run: Span) -> list[Span]:
        return sorted(
            (s for s in spans if s.parent_span_id == run.span_id and s.name != run.name),
            key=lambda s: s.start_time_unix_nano,
        )

    assert [s.name for s in calls_of(parent)] == [
        "chat scripted",
        "execute_tool subagent",
        "chat scripted",
        "execute_tool write_file",
        "chat scripted",
    ]
    assert [s.name for s in calls_of(child)] == [
        "chat scripted",
        "execute_tool read_file",
        "chat scripted",
    ]
    for run in runs:
        for span in calls_of(run):
            assert run.start_time_unix_nano <= span.start_time_unix_nano
            assert span.start_time_unix_nano <= span.end_time_unix_nano <= run.end_time_unix_nano
    chats = [s for s in spans if s.name == "chat scripted"]
    for chat in chats:
        chat_attributes = attributes(chat)
        assert chat.kind == Span.SPAN_KIND_CLIENT
        assert chat_attributes["gen_ai.operation.name"] == "chat"
        assert chat_attributes["gen_ai.request.model"] == "scripted"
        assert chat_attributes["gen_ai.usage.input_tokens"] > 0
        assert chat_attributes["gen_ai.usage.output_tokens"] > 0
    assert (
        sum(attributes(s)["gen_ai.usage.input_tokens"] for s in calls_of(parent)[::2])
        == (attributes(parent)["gen_ai.usage.input_tokens"])
    )

    tools = {s.name: s for s in spans if s.name.startswith("execute_tool")}
    sent_ids = [
        call["id"]
        for request in llm.requests
        for message in request["messages"]
        for call in message.get("tool_calls") or []
    ]
    for name, span in tools.items():
        tool_attributes = attributes(span)
        assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool_attributes["gen_ai.tool.name"] == name.removeprefix("execute_tool ")
        assert tool_attributes["gen_ai.tool.call.id"] in sent_ids
    failed = tools["execute_tool read_file"]
    assert failed.status.code == Status.STATUS_CODE_ERROR
    assert "missing.txt" in failed.status.message
    assert attributes(failed)["error.type"] == "_OTHER"
    assert tools["execute_tool write_file"].status.code == Status.STATUS_CODE_UNSET


def test_a_failed_run_is_exported_with_an_error_status(
    site_env: dict[str, str], llm: ScriptedLLM, collector: Collector
) -> None:
    llm.fault(401, body={"error": {"message": "bad key"}})
    env = {**site_env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url + "/custom/traces"}
    done = subprocess.run(
        [sys.executable, "manage.py", "agent", "-m", "hello"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0

    spans = [span for _, span in collector.wait_for(2)]
    assert collector.paths == ["/custom/traces"]
    run, chat = sorted(spans, key=lambda s: s.name != "invoke_agent agentsite")
    assert run.status.code == Status.STATUS_CODE_ERROR
    assert attributes(run)["error.type"] == "auth"
    assert chat.name == "chat scripted" and chat.parent_span_id == run.span_id
    assert chat.status.code == Status.STATUS_CODE_ERROR
    assert chat.status.message == "the model provider did not accept the site's credentials"
