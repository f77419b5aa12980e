"""HTTP for the MCP servers an operator has not marked trusted: the SDK's client (httpx2)
over a transport whose every connection goes to an address the network guard checked, as
web_fetch's does (`agent.tools.webhttp`).

The guard reads the host from the request's own URL when the connection is made, resolves
it once and connects to the address it approved: a server's name that later resolves to
127.0.0.1, or a redirect to another host, reaches nothing the guard refuses. Imported only
when such a server connects.
"""

from __future__ import annotations

import functools

import httpcore2
import httpx2

from agent.tools.guards import AddressGuard
from agent.tools.guards.pinned_http import guarded_transport


def untrusted_refusal(server: str, reason: str) -> str:
    """What the hub says of a server the guard kept from an address: the reason, and the
    setting that would let it through."""
    return (
        f"{reason}. MCP server '{server}' is not marked trusted: staff may set `trusted` on "
        "it (admin or /api/mcp-servers) to let it reach loopback and private addresses"
    )


def guarded_client(
    guard: AddressGuard, *, server: str, headers: dict[str, str], timeout: httpx2.Timeout
) -> httpx2.AsyncClient:
    """The HTTP client of an untrusted MCP server. ``trust_env=False``: a proxy from the
    environment would connect on the server's behalf and so bypass the guard."""
    return httpx2.AsyncClient(
        transport=guarded_transport(
            httpx2,
            httpcore2,
            guard,
            max_connections=10,
            refusal=functools.partial(untrusted_refusal, server),
        ),
        trust_env=False,
        headers=headers,
        timeout=timeout,
    )
