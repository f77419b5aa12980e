"""A scripted OpenAI-compatible chat server for tests and benchmarks.

It listens on 127.0.0.1, speaks `/v1/chat/completions` (streaming SSE and plain JSON) and
`/v1/models`, and answers each request with the next queued step: text, tool calls whose
arguments arrive split over several chunks, or a fault (an HTTP error with Retry-After, a
hang, a connection dropped mid-stream). With nothing queued it echoes the last user
message, so it also serves as a local model for trying the product by hand:

    python -m tests.llm_server --port 8001
    AGENT_MODEL=openai/scripted AGENT_API_BASE=http://127.0.0.1:8001/v1 ./manage.py agent

Longer than the 400 lines a module here usually keeps to, on purpose: the script of steps,
the HTTP handler that plays them and the command line are one small server, read together
by whoever writes a test against it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

MODEL_ID = "scripted"


@dataclass
class Step:
    """One scripted answer. `kind` is text, tools, error, hang, drop, cut, garbage,
    stream_error or stamps.

    `stamps` streams `chunks` pieces, each the wall-clock time (ns) it was sent, in
    angle brackets: latency benchmarks read them back on the client side.
    """

    kind: str
    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    chunks: int = 4
    status: int = 200
    retry_after: str | None = None
    error_body: dict[str, Any] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    usage: dict[str, int] | None = None
    # The delta key reasoning travels under: DeepSeek and vLLM say reasoning_content,
    # OpenRouter and Ollama say reasoning.
    reasoning_key: str = "reasoning_content"
    # Answer with one JSON body even when a stream was asked for, as some servers do.
    plain: bool = False
    # An error's body as raw bytes (an HTML page, a proxy's text), instead of JSON.
    error_raw: bytes | None = None
    # Seconds the response stays open after [DONE] before it ends.
    linger: float = 0.0


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, parts)))
    return [text[i : i + size] for i in range(0, len(text), size)]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    # Benchmarks open hundreds of streams at once; the default backlog of 5 resets them.
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up mid-stream on purpose (timeouts, cancelled turns): not news.
        logger.debug("connection from %s ended abruptly", client_address, exc_info=True)


class ScriptedLLM:
    """The server. Queue steps with `reply`, `tool_call(s)`, `fault`, `hang`, `drop`."""

    def __init__(
        self,
        *,
        context_window: int = 32768,
        port: int = 0,
        default: Step | None = None,
        tool_loop: int = 0,
        tool_loop_delay: float = 0.0,
        tool_loop_stamps: int = 0,
        model_id: str = MODEL_ID,
    ) -> None:
        self.context_window = context_window
        # What /models lists: another id lets it stand in for a server such as Ollama.
        self.model_id = model_id
        # Reported by /models as the model's output limit, when set.
        self.output_limit: int | None = None
        self.default = default
        self.tool_loop = tool_loop
        self.tool_loop_delay = tool_loop_delay
        self.tool_loop_stamps = tool_loop_stamps
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        # Requests refused for being over `context_window`, which it advertises and enforces.
        self.refused = 0
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------

    def reply(self, text: str, *, chunks: int = 4, reasoning: str = "", **kw: Any) -> ScriptedLLM:
        return self._push(Step("text", text=text, chunks=chunks, reasoning=reasoning, **kw))

    def tool_call(
        self, name: str, arguments: dict[str, Any] | str, *, text: str = "", **kw: Any
    ) -> ScriptedLLM:
        return self.tool_calls([(name, arguments)], text=text, **kw)

    def tool_calls(
        self,
        calls: list[tuple[str, dict[str, Any] | str]],
        *,
        text: str = "",
        ids: list[str] | None = None,
        **kw: Any,
    ) -> ScriptedLLM:
        """Calls in one answer. `ids` gives them ids of the test's choosing (the same id
        twice, as some servers send); each is otherwise a fresh `call_<n>`. Arguments given
        as a dict are JSON-encoded here, so that a lone surrogate or a NUL in them travels
        as a JSON escape (`"\\udc80"`), as a model sends it."""
        specs = [
            {
                "id": ids[position] if ids is not None else f"call_{next(self._ids)}",
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            }
            for position, (name, args) in enumerate(calls)
        ]
        return self._push(Step("tools", text=text, tool_calls=specs, **kw))

    def fault(
        self,
        status: int,
        *,
        retry_after: str | None = None,
        body: dict[str, Any] | None = None,
        raw: bytes | None = None,
    ) -> ScriptedLLM:
        step = Step("error", status=status, retry_after=retry_after, error_body=body)
        step.error_raw = raw
        return self._push(step)

    def hang(self, seconds: float = 30.0) -> ScriptedLLM:
        return self._push(Step("hang", delay=seconds))

    def stamps(self, chunks: int) -> ScriptedLLM:
        return self._push(Step("stamps", chunks=chunks))

    def drop(self, after_text: str = "") -> ScriptedLLM:
        """Start streaming `after_text`, then close the connection without finishing."""
        return self._push(Step("drop", text=after_text, chunks=2))

    def cut(self, after_text: str = "") -> ScriptedLLM:
        """Stream `after_text`, then end the response cleanly but early: no finish, no [DONE]."""
        return self._push(Step("cut", text=after_text, chunks=2))

    def garbage(self, after_text: str = "") -> ScriptedLLM:
        """Stream `after_text`, then an event that is not JSON."""
        return self._push(Step("garbage", text=after_text, chunks=2))

    def stream_error(self, message: str, *, code: int = 500) -> ScriptedLLM:
        """Start streaming, then send an error event, as OpenRouter and vLLM do."""
        return self._push(Step("stream_error", text=message, status=code))

    def _push(self, step: Step) -> ScriptedLLM:
        with self._lock:
            self._steps.append(step)
        return self

    @property
    def pending(self) -> int:
        return len(self._steps)

    def _next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(body)
            if self._steps:
                return self._steps.popleft()
        if self.default is not None:
            return self.default
        if self.tool_loop:
            return self._tool_loop_step(body)
        return Step("text", text=f"echo: {_last_user_text(body)}")

    def _tool_loop_step(self, body: dict[str, Any]) -> Step:
        """`tool_loop` reads of hello.txt after each user message, then an answer: a tool
        conversation that needs no script, for benchmarks against a model in its own
        process."""
        results = 0
        for message in reversed(body.get("messages", [])):
            if message.get("role") == "user":
                break
            results += message.get("role") == "tool"
        if results < self.tool_loop:
            call = {
                "id": f"call_{next(self._ids)}",
                "name": "read_file",
                "arguments": json.dumps({"path": "hello.txt"}),
            }
            return Step("tools", tool_calls=[call], delay=self.tool_loop_delay)
        if self.tool_loop_stamps:
            return Step("stamps", chunks=self.tool_loop_stamps, delay=self.tool_loop_delay)
        return Step(
            "text",
            text="All files read; they say Hello World.",
            chunks=8,
            delay=self.tool_loop_delay,
        )

    # -- lifecycle -------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedLLM:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP ------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Stream chunks are small writes; without this, Nagle's algorithm holds each
                # one back until the client's delayed ACK, 40 ms a time.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                logger.debug(format, *args)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    data = {
                        "object": "list",
                        "data": [
                            {
                                "id": llm.model_id,
                                "object": "model",
                                "owned_by": "tests",
                                "max_model_len": llm.context_window,
                                **(
                                    {"max_completion_tokens": llm.output_limit}
                                    if llm.output_limit
                                    else {}
                                ),
                            }
                        ],
                    }
                    self._json(200, data)
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._json(400, {"error": {"message": "body is not JSON"}})
                    return
                llm.headers.append(dict(self.headers))
                wanted = prompt_tokens(body) + int(
                    body.get("max_completion_tokens") or body.get("max_tokens") or 0
                )
                if wanted > llm.context_window:
                    # As vLLM and OpenAI answer it; the queued step waits for the next call.
                    llm.refused += 1
                    self._json(400, {"error": {"type": "invalid_request_error", "message": (
                        f"This model's maximum context length is {llm.context_window} tokens. "
                        f"However, you requested {wanted} tokens. Please reduce the length "
                        "of the messages or completion.")}})  # fmt: skip
                    return
                step = llm._next_step(body)
                if step.kind == "error":
                    self._error(step)
                    return
                if step.kind == "hang":
                    time.sleep(step.delay)
                    self.close_connection = True
                    return
                time.sleep(step.delay)  # the model thinking before its first token
                if body.get("stream") and not step.plain:
                    self._stream(step, body)
                else:
                    self._json(200, self._completion(step, body))

            def _json(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _error(self, step: Step) -> None:
                body = step.error_body or {
                    "error": {"message": f"scripted failure {step.status}", "type": "server_error"}
                }
                raw = step.error_raw or json.dumps(body).encode()
                self.send_response(step.status)
                kind = "text/html; charset=utf-8" if step.error_raw else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(raw)))
                if step.retry_after is not None:
                    self.send_header("Retry-After", step.retry_after)
                self.end_headers()
                self.wfile.write(raw)

            def _completion(self, step: Step, body: dict[str, Any]) -> dict[str, Any]:
                message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
                if step.reasoning:
                    message[step.reasoning_key] = step.reasoning
                if step.tool_calls:
                    message["tool_calls"] = [
                        {
                            "id": tc["id"],
                            "type": "function",
                            "function": {"name": tc["name"], "arguments": tc["arguments"]},
                        }
                        for tc in step.tool_calls
                    ]
                return {
                    "id": f"chatcmpl-{next(llm._ids)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", MODEL_ID),
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if step.tool_calls else "stop",
                        }
                    ],
                    "usage": _usage(step, body),
                }

            def _stream(self, step: Step, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                base = {
                    "id": f"chatcmpl-{next(llm._ids)}",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model", MODEL_ID),
                }

                def send(delta: dict[str, Any], finish: str | None = None) -> None:
                    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
                    if body.get("logprobs") and delta.get("content"):
                        # As OpenAI does when asked: each piece of text with its chance.
                        token = {"token": delta["content"], "logprob": -0.25, "top_logprobs": []}
                        choice["logprobs"] = {"content": [token]}
                    chunk = {**base, "choices": [choice]}
                    self._chunk(f"data: {json.dumps(chunk)}\n\n")
                    if step.chunk_delay:
                        time.sleep(step.chunk_delay)

                send({"role": "assistant", "content": ""})
                for piece in _split(step.reasoning, step.chunks):
                    send({step.reasoning_key: piece})
                if step.kind == "stream_error":
                    error = {"error": {"message": step.text, "code": step.status}}
                    self._chunk(f"data: {json.dumps(error)}\n\n")
                    self._end()
                    return
                for piece in _split(step.text, step.chunks):
                    send({"content": piece})
                if step.kind == "garbage":
                    self._chunk("data: {this is not json\n\n")
                if step.kind in ("cut", "garbage"):
                    self._end()
                    return
                if step.kind == "stamps":
                    for _ in range(step.chunks):
                        send({"content": f"<{time.time_ns()}>"})
                if step.kind == "drop":
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                for index, tc in enumerate(step.tool_calls):
                    parts = _split(tc["arguments"], 3) or [""]
                    first = {
                        "index": index,
                        "id": tc["id"],
                        "type": "function",
                        "function": {"name": tc["name"], "arguments": parts[0]},
                    }
                    send({"tool_calls": [first]})
                    for part in parts[1:]:
                        send({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
                send({}, "tool_calls" if step.tool_calls else "stop")
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage_chunk = {**base, "choices": [], "usage": _usage(step, body)}
                    self._chunk(f"data: {json.dumps(usage_chunk)}\n\n")
                self._chunk("data: [DONE]\n\n")
                if step.linger:
                    time.sleep(step.linger)
                self._end()

            def _end(self) -> None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _chunk(self, text: str) -> None:
                raw = text.encode()
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                self.wfile.flush()

        return Handler


def prompt_tokens(body: dict[str, Any]) -> int:
    """What a request's messages and tools cost here: four characters a token, plus a few
    per message, as real tokenizers roughly count English."""
    tokens = len(json.dumps(body.get("tools") or [])) // 4
    for message in body.get("messages") or []:
        text = json.dumps([message.get("content"), message.get("tool_calls")])
        tokens += 4 + len(text) // 4
    return tokens


# The line the agent puts before the user's words (agent.context): an echo says only the words.
_STAMPED = re.compile(r"\A\[Current time: [^\]]*\]\n\n")


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            return _STAMPED.sub("", content) if isinstance(content, str) else json.dumps(content)
    return ""


def _usage(step: Step, body: dict[str, Any]) -> dict[str, int]:
    if step.usage:
        return step.usage
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = max(1, (len(step.text) + sum(len(t["arguments"]) for t in step.tool_calls)) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument(
        "--model",
        default=MODEL_ID,
        help="the model id /v1/models lists (e.g. llama3.1:latest, to stand in for Ollama)",
    )
    parser.add_argument(
        "--script",
        help="JSON file: a list of steps such as "
        '{"reply": "text"} or {"tool_call": "write_file", "arguments": {...}}',
    )
    parser.add_argument(
        "--stamps",
        type=int,
        default=0,
        help="answer with N time-stamped chunks (with --tool-loop: its final answer)",
    )
    parser.add_argument(
        "--interval", type=float, default=0.0, help="seconds between streamed chunks"
    )
    parser.add_argument(
        "--tool-loop",
        type=int,
        default=0,
        help="answer every user message with N read_file calls, then a reply",
    )
    parser.add_argument(
        "--delay", type=float, default=0.0, help="seconds before each answer's first byte"
    )
    args = parser.parse_args()
    stamps_only = args.stamps and not args.tool_loop
    default = Step("stamps", chunks=args.stamps, chunk_delay=args.interval) if stamps_only else None
    llm = ScriptedLLM(
        port=args.port,
        default=default,
        tool_loop=args.tool_loop,
        tool_loop_delay=args.delay,
        tool_loop_stamps=args.stamps if args.tool_loop else 0,
        model_id=args.model,
    )
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            for item in json.load(fh):
                if "tool_call" in item:
                    llm.tool_call(item["tool_call"], item.get("arguments", {}))
                else:
                    llm.reply(item["reply"])
    logging.basicConfig(level=logging.INFO)
    logger.info("scripted model listening on %s (model id %r)", llm.base_url, MODEL_ID)
    with contextlib.suppress(KeyboardInterrupt):
        llm._server.serve_forever()


if __name__ == "__main__":
    main()
