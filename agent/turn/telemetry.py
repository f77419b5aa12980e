"""Runs exported as OpenTelemetry spans, when OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) names a collector that speaks OTLP over HTTP.

A run is a span `invoke_agent agentsite`; each of its model calls a child span `chat
<model>`, each tool call a child span `execute_tool <name>`, with the attributes of the
GenAI semantic conventions (`gen_ai.operation.name`, `gen_ai.request.model`,
`gen_ai.usage.input_tokens`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, ...) and an error
status for what failed. They are made once the run has ended, from its trace, with the
times the trace recorded, and handed to the SDK's batch processor, whose own thread sends
them: the turn waits for no collector, and a turn of a site without the setting loads
nothing of OpenTelemetry. The SDK and its exporter are the optional extra `otel`; a
turn's end (`agent.turn.closing`) imports this module only when a collector is named.

A run's span id comes from its id, and its trace id is its own id or, for a sub-agent's
run, the id of the run that started it: a sub-agent's span is a child of that run's span,
in the same trace, whichever process ran each of them.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.utils import timezone
from opentelemetry import trace as otel
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.re import parse_env_headers

from agent.conf import AgentSettings
from agent.turn.trace import Step
from sessions_app.models import Run

logger = logging.getLogger(__name__)

AGENT_NAME = "agentsite"
SPAN_ID_BITS = (1 << 64) - 1
# For an error of no kind we know: the semantic conventions' own word for it.
OTHER_ERROR = "_OTHER"

_lock = threading.Lock()
_exporting: tuple[tuple[str, str, str], otel.Tracer, _RunIds] | None = None


class _RunIds(IdGenerator):
    """Random ids, but for a run's own span: the ids `preset` gave, used once."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._next = threading.local()

    def preset(self, trace_id: int, span_id: int) -> None:
        self._next.ids = (trace_id, span_id)

    def generate_trace_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        return ids[0] if ids else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        if not ids:
            return self._random.generate_span_id()
        self._next.ids = None
        return int(ids[1])


def export_run(
    run: Run,
    *,
    session_key: str,
    status: str,
    error: str | None,
    error_kind: str | None,
    usage: dict[str, int],
    cost: float | None,
    steps: list[Step],
    conf: AgentSettings,
) -> None:
    """Hand `run`'s spans to the exporter; a failure is logged, never raised."""
    try:
        tracer, ids = _tracer(conf)
        _export(tracer, ids, run, session_key, status, error, error_kind, usage, cost, steps)
    except Exception:
        logger.exception("run %s could not be exported to OpenTelemetry", run.pk)


def _tracer(conf: AgentSettings) -> tuple[otel.Tracer, _RunIds]:
    """The process's tracer, made for the first run it exports (again if the settings
    changed, as tests change them)."""
    global _exporting
    endpoint = conf.otel_traces_endpoint or conf.otel_endpoint.rstrip("/") + "/v1/traces"
    wanted = (endpoint, conf.otel_headers, conf.otel_service)
    with _lock:
        if _exporting is None or _exporting[0] != wanted:
            ids = _RunIds()
            provider = TracerProvider(
                resource=Resource.create({"service.name": conf.otel_service}), id_generator=ids
            )
            headers = parse_env_headers(conf.otel_headers, liberal=True)
            exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers)
            provider.add_span_processor(BatchSpanProcessor(exporter))
            _exporting = (wanted, provider.get_tracer("agentsite"), ids)
            logger.info("exporting runs as OpenTelemetry spans to %s", endpoint)
        return _exporting[1], _exporting[2]


def _export(
    tracer: otel.Tracer,
    ids: _RunIds,
    run: Run,
    session_key: str,
    status: str,
    error: str | None,
    error_kind: str | None,
    usage: dict[str, int],
    cost: float | None,
    steps: list[Step],
) -> None:
    provider, model = split_model(run.model)
    root = run.parent_run_id or run.pk
    parent = None
    if run.parent_run_id is not None:
        parent = otel.set_span_in_context(
            otel.NonRecordingSpan(
                otel.SpanContext(
                    trace_id=root.int,
                    span_id=_span_id(root),
                    is_remote=True,
                    trace_flags=otel.TraceFlags(otel.TraceFlags.SAMPLED),
                )
            )
        )
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.conversation.id": session_key,
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens", 0)),
        "gen_ai.usage.output_tokens": int(usage.get("completion_tokens", 0)),
        "agentsite.run.id": str(run.pk),
        "agentsite.channel": run.channel,
        "agentsite.status": status,
    }
    if provider:
        attributes["gen_ai.provider.name"] = provider
    if cost is not None:
        attributes["agentsite.cost_usd"] = cost
    if run.parent_run_id is not None:
        attributes["agentsite.parent_run.id"] = str(run.parent_run_id)
    if run.cron_job_id is not None:
        attributes["agentsite.cron_job.id"] = run.cron_job_id
    timed = [(datetime.fromisoformat(step["started"]), step) for step in steps]
    started = min([run.started or timezone.now(), *(start for start, _ in timed)])
    ends = (start + timedelta(milliseconds=step["ms"]) for start, step in timed)
    finished = max([run.finished or timezone.now(), *ends])

    ids.preset(root.int, _span_id(run.pk))
    span = tracer.start_span(
        f"invoke_agent {AGENT_NAME}",
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        start_time=_ns(started),
    )
    if status == Run.Status.FAILED:
        span.set_attribute("error.type", error_kind or OTHER_ERROR)
        span.set_status(Status(StatusCode.ERROR, error or None))
    inside = otel.set_span_in_context(span)
    for start, step in timed:
        _step_span(tracer, inside, start, step)
    span.end(end_time=_ns(finished))


def _step_span(tracer: otel.Tracer, inside: Any, start: datetime, step: Step) -> None:
    if step["kind"] == "model":
        provider, model = split_model(step["name"])
        name = f"chat {model}"
        kind = SpanKind.CLIENT
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
        }
        if provider:
            attributes["gen_ai.provider.name"] = provider
        tokens = step.get("tokens")
        if tokens:
            attributes["gen_ai.usage.input_tokens"] = int(tokens.get("prompt_tokens", 0))
            attributes["gen_ai.usage.output_tokens"] = int(tokens.get("completion_tokens", 0))
        if step.get("cost") is not None:
            attributes["agentsite.cost_usd"] = step["cost"]
    else:
        name = f"execute_tool {step['name']}"
        kind = SpanKind.INTERNAL
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": step["name"],
            "gen_ai.tool.type": "function",
        }
        if step.get("call_id"):
            attributes["gen_ai.tool.call.id"] = step["call_id"]
    child = tracer.start_span(
        name, context=inside, kind=kind, attributes=attributes, start_time=_ns(start)
    )
    if step.get("error"):
        child.set_attribute("error.type", "stopped" if step["error"] == "stopped" else OTHER_ERROR)
        child.set_status(Status(StatusCode.ERROR, step["error"]))
    child.end(end_time=_ns(start + timedelta(milliseconds=step["ms"])))


def split_model(model_id: str) -> tuple[str, str]:
    """The provider and the model's own name in a model id: `openai/gpt-4o-mini` is
    OpenAI's `gpt-4o-mini`; an id without a provider names none."""
    provider, slash, name = model_id.partition("/")
    return (provider, name) if slash else ("", model_id)


def _span_id(run_id: UUID) -> int:
    return run_id.int & SPAN_ID_BITS or 1


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
