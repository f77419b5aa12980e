"""The process-wide MCP hub: configured servers, their connections, their tools.

Turns run on many event loops in one process (daphne's, one per command-line turn, one per
queued task, one per test), while an MCP connection belongs to the loop it was made on. So
every connection lives on one daemon thread with a loop of its own, started on first use;
callers on any loop submit coroutines to it and await the result. Cancelling the caller
cancels the hub-side call, which tells the server (`notifications/cancelled`).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import time
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from agent.tools.base import Tool, ToolError
from agent.tools.guards import AddressGuard
from agent.tools.mcp.config import McpServerConfig, redact
from agent.tools.mcp.connection import (
    CONNECT_TIMEOUT,
    DEAD,
    READY,
    Connection,
    describe_error,
    list_tools,
)
from agent.tools.mcp.tool import McpTool, make_tools, result_text

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A server that failed to connect is left out of every turn for this long, twice as long
# after each failure in a row, up to the most: a server that hangs would otherwise hold up
# a turn for the whole connect timeout every 30 seconds.
RETRY_AFTER = 30.0
MAX_RETRY_AFTER = 600.0
# Beyond the server's own timeout: the time to reach it, and for it to confirm the timeout.
CALL_GRACE = 5.0


@dataclass(frozen=True, slots=True)
class _Failure:
    config: McpServerConfig
    until: float
    error: str
    count: int = 1


class McpHub:
    """Connections to the configured MCP servers, shared by every turn of the process."""

    def __init__(self, *, guard: AddressGuard | None = None) -> None:
        # Checks every connection of an http server not marked trusted; tests give their own.
        self._guard = guard or AddressGuard()
        self._lock = threading.Lock()
        self._configs: dict[str, McpServerConfig] = {}
        self._conns: dict[str, Connection] = {}
        self._failures: dict[str, _Failure] = {}
        # Per server: the config and listing its tools were made from, and the tools.
        self._tools: dict[str, tuple[McpServerConfig, tuple[Any, ...], tuple[McpTool, ...]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    # -- configuration (any thread) ---------------------------------------------------------

    def configure(self, servers: Iterable[McpServerConfig]) -> None:
        """Make ``servers`` the configured ones. Sync, thread-safe and without I/O: servers
        gone or changed are disconnected (their tools disappear); new ones connect on use."""
        configs: dict[str, McpServerConfig] = {}
        for config in servers:
            if config.name in configs:
                logger.warning("MCP server %r is configured twice; the first is kept", config.name)
                continue
            configs[config.name] = config
        with self._lock:
            if list(configs.items()) == list(self._configs.items()):
                return
            self._configs = configs
            gone = [conn for name, conn in self._conns.items() if configs.get(name) != conn.config]
            for conn in gone:
                del self._conns[conn.config.name]
            for table in (self._failures, self._tools):
                for name in [n for n, v in table.items() if configs.get(n) != _config_of(v)]:
                    del table[name]
            loop = self._loop
        if loop is not None:
            for conn in gone:
                loop.call_soon_threadsafe(conn.stop)

    # -- tools (any loop) -------------------------------------------------------------------

    async def tools(self) -> list[Tool]:
        """The tools of every configured server, connecting those not connected yet.

        Servers connect concurrently, each within ~20 s; one that fails is logged and left
        out, and not tried again for 30 s. The same objects come back while a server's
        tools are unchanged.
        """
        with self._lock:
            if not self._configs:
                return []
        try:
            return await _outcome(self._submit(self._collect()))
        except ToolError:
            return []

    def known_tools(self) -> list[Tool]:
        """The tools of the servers connected now; never connects."""
        with self._lock:
            tools: list[Tool] = []
            for name, config in self._configs.items():
                conn = self._conns.get(name)
                if conn is not None and conn.state == READY and conn.config == config:
                    tools.extend(self._tools_of(conn))
            return tools

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        cancelled: asyncio.Event | None = None,
    ) -> str:
        """Call ``tool`` of ``server`` and return its result as text.

        Raises `ToolError` for every expected failure (timeout, error answer, server gone).
        Ends early, cancelling the remote call, when ``cancelled`` is set or the caller is
        cancelled.
        """
        if cancelled is not None and cancelled.is_set():
            raise ToolError("the turn was stopped")
        future = self._submit(self._call(server, tool, arguments))
        watch = None if cancelled is None else asyncio.ensure_future(cancelled.wait())
        try:
            if watch is not None:
                waiters: list[asyncio.Future[Any]] = [future, watch]
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                if not future.done():
                    raise ToolError("the turn was stopped")
            return await _outcome(future)
        finally:
            # Cancels the hub-side task too (run_coroutine_threadsafe's future is chained).
            future.cancel()
            if watch is not None:
                watch.cancel()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Close every connection and stop the hub's thread. Configured servers stay
        configured: the hub starts again on next use."""
        with self._lock:
            loop, thread = self._loop, self._thread
            conns = list(self._conns.values())
            self._conns.clear()
            self._failures.clear()
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:
            for conn in conns:
                conn.stop()
            loop.call_soon(loop.stop)
            return
        try:
            future = asyncio.run_coroutine_threadsafe(_close_all(conns, timeout), loop)
            future.result(timeout + 5)
        except Exception:
            logger.warning("MCP hub: connections did not close in time", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)

    # -- the hub's loop ---------------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        loop = self._ensure_loop()
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def _forget(self) -> None:
        """Drop what a forked child inherits but can't use: the parent's thread, its loop,
        its servers, and a lock another thread may have held at the fork."""
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._conns.clear()
        self._loop = self._thread = None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._pid != os.getpid():
            self._forget()
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_run_loop, args=(loop,), name="mcp-hub", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _collect(self) -> list[Tool]:
        with self._lock:
            conns = [
                conn
                for config in self._configs.values()
                if (conn := self._connection(config, quiet=True)) is not None
            ]
        waiting = [conn.ready for conn in conns if not conn.ready.done()]
        if waiting:
            # Each connection bounds its own connect; asyncio.wait never cancels them.
            await asyncio.wait(waiting)
        tools: list[Tool] = []
        for conn in conns:
            if conn.state == READY and conn.stale:
                await self._relist(conn)
            with self._lock:
                if conn.state == READY and self._conns.get(conn.config.name) is conn:
                    tools.extend(self._tools_of(conn))
        return tools

    def _connection(self, config: McpServerConfig, *, quiet: bool) -> Connection | None:
        """The live or connecting connection of ``config``, started if there is none; None
        (or `ToolError` unless ``quiet``) while a recent failure holds it back."""
        conn = self._conns.get(config.name)
        if conn is not None and conn.state != DEAD:
            return conn
        failure = self._failures.get(config.name)
        if failure is not None and failure.config == config and time.monotonic() < failure.until:
            if quiet:
                return None
            raise ToolError(f"MCP server '{config.name}' is unavailable: {failure.error}")
        conn = self._conns[config.name] = Connection(config, self._guard)
        conn.task = asyncio.get_running_loop().create_task(self._hold(conn))
        return conn

    async def _hold(self, conn: Connection) -> None:
        await conn.hold()
        name = conn.config.name
        with self._lock:
            current = self._configs.get(name) == conn.config
            wait = RETRY_AFTER
            if conn.ready.result():
                self._failures.pop(name, None)
            elif current:
                last = self._failures.get(name)
                count = last.count + 1 if last is not None and last.config == conn.config else 1
                wait = min(RETRY_AFTER * 2 ** (count - 1), MAX_RETRY_AFTER)
                self._failures[name] = _Failure(
                    conn.config, time.monotonic() + wait, conn.error, count
                )
        if current and not conn.ready.result():
            logger.warning(
                "MCP server %r (%s) could not connect: %s; left out for %g s",
                name,
                conn.config.describe(),
                conn.error,
                wait,
            )

    async def _relist(self, conn: Connection) -> None:
        conn.stale = False
        try:
            conn.set_listing(await asyncio.wait_for(list_tools(conn.client), CONNECT_TIMEOUT))
        except Exception as exc:
            reason = redact(describe_error(exc), conn.config.secrets())
            logger.warning(
                "MCP server %r: listing its changed tools failed: %s", conn.config.name, reason
            )

    async def _call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        with self._lock:
            config = self._configs.get(server)
            if config is None:
                raise ToolError(f"MCP server '{server}' is not configured any more")
            conn = self._connection(config, quiet=False)
            assert conn is not None
        # Shielded: the connection is shared; a caller that stops waiting must not end it.
        if not await asyncio.shield(conn.ready) or conn.state != READY:
            raise ToolError(f"could not connect to MCP server '{server}': {conn.error}")
        timeout = config.tool_timeout
        try:
            async with asyncio.timeout(timeout + CALL_GRACE):
                result = await conn.client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise ToolError(_timed_out(server, tool, timeout)) from None
        except Exception as exc:
            raise self._call_failed(conn, tool, exc) from None
        return result_text(result)

    def _call_failed(self, conn: Connection, tool: str, exc: Exception) -> ToolError:
        import anyio
        import httpx2
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        server = conn.config.name
        if isinstance(exc, MCPError):
            if exc.code == REQUEST_TIMEOUT:
                return ToolError(_timed_out(server, tool, conn.config.tool_timeout))
            # An HTTP server that restarted has forgotten our session.
            if exc.code != CONNECTION_CLOSED and exc.message != "Session terminated":
                reason = redact(exc.message, conn.config.secrets())
                return ToolError(f"MCP server '{server}' refused the call to '{tool}': {reason}")
        elif not isinstance(exc, _transport_errors(anyio, httpx2)):
            reason = redact(describe_error(exc), conn.config.secrets())
            logger.warning("MCP server %r: calling %r failed: %s", server, tool, reason)
            return ToolError(f"calling '{tool}' on MCP server '{server}' failed: {reason}")
        # The server may have done part of the work: the call is not retried, the next one
        # starts the server again.
        conn.stop()
        return ToolError(
            f"MCP server '{server}' stopped during the call to '{tool}'; the call was not "
            "repeated, and the next call connects again"
        )

    def _tools_of(self, conn: Connection) -> tuple[McpTool, ...]:
        """The tools of ``conn``, the same objects while its config and listing hold.
        Needs the lock."""
        name = conn.config.name
        cached = self._tools.get(name)
        if cached is not None and cached[0] == conn.config and cached[1] == conn.signature:
            return cached[2]
        tools = make_tools(self, conn.config, conn.listing)
        self._tools[name] = (conn.config, conn.signature, tools)
        return tools


async def _outcome(future: asyncio.Future[T]) -> T:
    """``future``'s result; `ToolError` when the hub, not the caller, cancelled it."""
    try:
        return await future
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        raise ToolError("the MCP client was shut down") from None


def _transport_errors(anyio: Any, httpx2: Any) -> tuple[type[BaseException], ...]:
    """Exceptions that mean the connection itself broke."""
    return (
        OSError,
        EOFError,
        anyio.BrokenResourceError,
        anyio.ClosedResourceError,
        anyio.EndOfStream,
        httpx2.TransportError,
    )


def _config_of(entry: Any) -> McpServerConfig:
    return entry.config if isinstance(entry, _Failure) else entry[0]


def _timed_out(server: str, tool: str, timeout: float) -> str:
    return f"the MCP tool '{tool}' of server '{server}' timed out after {timeout:g} s"


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def _close_all(conns: list[Connection], grace: float) -> None:
    for conn in conns:
        conn.stop()
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    holders = [conn.task for conn in conns if conn.task is not None]
    if holders:
        await asyncio.wait(holders, timeout=grace)
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2)


_hub: McpHub | None = None
_hub_lock = threading.Lock()


def mcp_hub() -> McpHub:
    """The process-wide hub, made on first use; closed at process exit."""
    global _hub
    with _hub_lock:
        if _hub is None:
            _hub = McpHub()
            atexit.register(_hub.shutdown, 3.0)
            os.register_at_fork(after_in_child=_hub._forget)
        return _hub
