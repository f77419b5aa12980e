"""One MCP server's connection, held open by one task on the hub's event loop.

The SDK's transports and sessions are anyio task groups bound to the task that entered
them, so a connection is entered, used and left by `Connection.hold`, a task that lives as
long as the connection; calls made by other tasks of the same loop share its session.
Everything here runs on the hub's loop, and the SDK is imported only when a server connects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from agent.tools.base import ToolError
from agent.tools.guards import AddressGuard
from agent.tools.mcp.config import McpServerConfig, redact

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 20.0
# Leaving a connection politely (an HTTP session's DELETE) may not hold the hub up longer.
CLOSE_TIMEOUT = 5.0
# A server's stderr may outlive it in a child it started; its reader waits this long.
STDERR_GRACE = 0.5
MAX_PAGES = 50
MAX_STDERR_LINE = 2000

CONNECTING, READY, DEAD = "connecting", "ready", "dead"


class Connection:
    """A server's session and tool listing while ``state`` is "ready".

    ``ready`` resolves to True once the tools are listed, or to False when connecting failed
    (``error`` says why). ``state`` turns "dead" when the connection ends for any reason:
    `stop`, the server exiting, a broken transport. A dead connection is never reused.
    """

    def __init__(self, config: McpServerConfig, guard: AddressGuard | None = None) -> None:
        self.config = config
        self.guard = guard or AddressGuard()  # for an http server not marked trusted
        self.state = CONNECTING
        self.error = ""
        self.client: Any = None
        self.listing: list[Any] = []
        self.signature: tuple[tuple[str, str, str], ...] = ()
        self.stale = False  # the server said its tools changed
        self.ready: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None  # the hub's task that runs `hold`
        self._wake = asyncio.Event()
        self._scope: Any = None  # anyio.CancelScope of `hold`
        self._stopped = False  # by us, not by the server
        self._lost = False  # the server closed the connection
        self._stderr_tail: deque[str] = deque(maxlen=3)

    def stop(self) -> None:
        """End the connection: no new calls use it, and its task closes it (a connect in
        progress ends at once)."""
        self._stopped = True
        self._end()

    def _end(self) -> None:
        if self.state == CONNECTING and self._scope is not None:
            self._scope.cancel()
        self.state = DEAD
        self._wake.set()

    def _server_closed(self) -> None:
        # Closing the connection ourselves (stopped, or out of time) also ends the stream.
        if not self._stopped and not (self._scope is not None and self._scope.cancel_called):
            self._lost = True
        self._end()

    def set_listing(self, listing: list[Any]) -> None:
        self.listing = listing
        self.signature = tuple(
            (tool.name, tool.description or "", json.dumps(tool.input_schema, sort_keys=True))
            for tool in listing
        )

    async def hold(self) -> None:
        """Connect, list the tools, and keep the connection until it is stopped or lost."""
        import anyio

        name = self.config.name
        try:
            if self._stopped:
                return
            with anyio.CancelScope(deadline=anyio.current_time() + CONNECT_TIMEOUT) as scope:
                self._scope = scope
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._open(stack)
                    self.set_listing(await list_tools(client))
                    if self.state == CONNECTING:
                        scope.deadline = math.inf
                        self.client, self.state = client, READY
                        self.ready.set_result(True)
                        await self._wake.wait()
                    self.state = DEAD
                    scope.deadline = anyio.current_time() + CLOSE_TIMEOUT
            if not self.ready.done() and scope.cancelled_caught:
                if self._lost:
                    self.error = "the server closed the connection"
                elif not self._stopped:
                    self.error = f"no answer within {CONNECT_TIMEOUT:g} s"
            elif self.ready.done() and self._lost:
                logger.warning("MCP server %r closed the connection%s", name, self._last_words())
        except Exception as exc:
            self.error = self._describe(exc)
            if self.ready.done():
                logger.warning("MCP server %r: connection lost: %s", name, self.error)
        finally:
            self.state, self.client = DEAD, None
            if not self.ready.done():
                self.error = (
                    self.error or "the connection ended before the server answered"
                ) + self._last_words()
                self.ready.set_result(False)

    def _last_words(self) -> str:
        return f" (its last output: {self._stderr_tail[-1]!r})" if self._stderr_tail else ""

    async def _open(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client
        from mcp_types import Implementation

        if self.config.transport == "stdio":
            transport: Any = self._stdio_transport()
        else:
            transport = await self._http_transport(stack)
        client = Client(
            transport,
            cache=None,  # the hub keeps the listing itself, and refetches on list_changed
            client_info=Implementation(name="agentsite", version="1"),
            message_handler=self._on_message,
        )
        return await stack.enter_async_context(client)

    @contextlib.asynccontextmanager
    async def _stdio_transport(self) -> AsyncIterator[Any]:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        cfg = self.config
        if cfg.cwd:
            os.makedirs(cfg.cwd, exist_ok=True)
        params = StdioServerParameters(
            command=cfg.command,
            args=list(cfg.args),
            # stdio_client lays these over the SDK's short list of safe variables (PATH,
            # HOME, ...), never over this process's environment and its secrets.
            env=dict(cfg.env) or None,
            cwd=cfg.cwd or None,
        )
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        stderr = asyncio.create_task(self._log_stderr(read_fd))
        try:
            async with stdio_client(params, errlog=errlog) as (read_stream, write_stream):
                errlog.close()  # the server has its own copy; EOF comes when it exits
                async with _watch_end(read_stream, self._server_closed) as watched:
                    yield watched, write_stream
        finally:
            errlog.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(stderr), STDERR_GRACE)
            stderr.cancel()

    async def _http_transport(self, stack: contextlib.AsyncExitStack) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        cfg = self.config
        # Reads wait as long as a tool may take; an SSE stream may stay quiet longer.
        timeout = httpx2.Timeout(30.0, read=max(300.0, cfg.tool_timeout + 30.0))
        if cfg.trusted:
            http = httpx2.AsyncClient(headers=dict(cfg.headers), timeout=timeout)
        else:
            from agent.tools.mcp.guarded import guarded_client

            http = guarded_client(
                self.guard, server=cfg.name, headers=dict(cfg.headers), timeout=timeout
            )
        await stack.enter_async_context(http)
        return streamable_http_client(cfg.url, http_client=http)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            logger.debug("MCP server %r: transport error: %s", self.config.name, message)
        elif getattr(message, "method", "") == "notifications/tools/list_changed":
            self.stale = True

    async def _log_stderr(self, fd: int) -> None:
        """Log the server's stderr, line by line, until it closes."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        pipe = os.fdopen(fd, "rb", 0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        secrets = self.config.secrets()
        buffer = b""
        try:
            while chunk := await reader.read(65536):
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()[-MAX_STDERR_LINE:]
                for line in lines:
                    self._stderr_line(line, secrets)
            self._stderr_line(buffer, secrets)
        finally:
            transport.close()

    def _stderr_line(self, raw: bytes, secrets: tuple[str, ...]) -> None:
        line = redact(raw.decode(errors="replace").rstrip()[:MAX_STDERR_LINE], secrets)
        if line:
            self._stderr_tail.append(line[:200])
            logger.info("MCP server %r: %s", self.config.name, line)

    def _describe(self, exc: BaseException) -> str:
        return redact(describe_error(exc), self.config.secrets())


async def list_tools(client: Any) -> list[Any]:
    """Every tool the server offers, page by page."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def describe_error(exc: BaseException) -> str:
    """A one-line reason for ``exc``: the first real failure inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        leaves = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (leaves or list(exc.exceptions))[0]
    message = getattr(exc, "message", None) or str(exc)
    if isinstance(exc, ToolError) and message:
        return message  # written for people already (the network guard's refusals)
    kind = type(exc).__name__
    return f"{kind}: {message}" if message else kind


@contextlib.asynccontextmanager
async def _watch_end(read_stream: Any, on_end: Callable[[], None]) -> AsyncIterator[Any]:
    """``read_stream`` passed through, calling ``on_end`` when the server closes it.

    The SDK's session sees a server's exit only as requests failing; the hub must know at
    once, so that the next call starts the server again instead of failing too.
    """
    import anyio

    send, receive = anyio.create_memory_object_stream[Any](0)

    async def pump() -> None:
        try:
            async with send:
                async for item in read_stream:
                    await send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            on_end()

    async with anyio.create_task_group() as group:
        group.start_soon(pump)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()
