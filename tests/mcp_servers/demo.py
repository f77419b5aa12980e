"""A small MCP server for the client's tests, written with the SDK's own server side.

    python -m tests.mcp_servers.demo                 # stdio
    python -m tests.mcp_servers.demo --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp

``sleep`` appends what happened to it (``started``, then ``finished`` or ``cancelled``) to
the file named by ``--log`` or ``$MCP_DEMO_LOG``, so a test can see a cancellation arrive.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("demo", log_level="WARNING")
_log_path = os.environ.get("MCP_DEMO_LOG", "")


def _record(event: str) -> None:
    if _log_path:
        with open(_log_path, "a", encoding="utf-8") as log:
            log.write(f"{time.time():.3f} {event}\n")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail() -> str:
    """Always fail, as a tool error result."""
    raise ToolError("the demo tool failed on purpose")


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, recording whether it finished or was cancelled."""
    _record(f"started {seconds}")
    try:
        await anyio.sleep(seconds)
    except BaseException:
        _record("cancelled")
        raise
    _record("finished")
    return f"slept {seconds}"


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of this server, or "<unset>"."""
    return os.environ.get(name, "<unset>")


def main(argv: list[str] | None = None) -> None:
    global _log_path
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    parser.add_argument("--log", default=_log_path, help="where `sleep` records its events")
    args = parser.parse_args(argv)
    _log_path = args.log
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
