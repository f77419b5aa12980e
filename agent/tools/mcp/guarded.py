"""HTTP for the MCP servers an operator has not marked trusted: the SDK's client (httpx2)
over a transport whose every connection goes to an address the network guard checked, as
web_fetch's does (`agent.tools.webhttp`).

The guard reads the host from the request's own URL when the connection is made, resolves
it once and connects to the address it approved: a server's name that later resolves to
127.0.0.1, or a redirect to another host, reaches nothing the guard refuses. Imported only
when such a server connects.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, cast

import httpcore2
import httpx2

from agent.tools.guards import AddressGuard, GuardError


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx2.create_ssl_context()


def untrusted_refusal(server: str, reason: str) -> str:
    """What the hub says of a server the guard kept from an address: the reason, and the
    setting that would let it through."""
    return (
        f"{reason}. MCP server '{server}' is not marked trusted: staff may set `trusted` on "
        "it (admin or /api/mcp-servers) to let it reach loopback and private addresses"
    )


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    def __init__(self, guard: AddressGuard, server: str) -> None:
        self._guard = guard
        self._server = server
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        async def to(address: str) -> httpcore2.AsyncNetworkStream:
            return await self._inner.connect_tcp(
                address,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )

        try:
            return await self._guard.connect(
                host, port, to, (httpcore2.ConnectError, httpcore2.ConnectTimeout)
            )
        except GuardError as exc:
            raise GuardError(untrusted_refusal(self._server, str(exc))) from None

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise GuardError(untrusted_refusal(self._server, "unix sockets cannot be reached"))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@contextlib.contextmanager
def _as_httpx2_errors() -> Iterator[None]:
    # What httpx2's own transport does: the SDK and the hub know httpx2's errors only.
    try:
        yield
    except httpcore2.TimeoutException as exc:
        raise httpx2.TimeoutException(str(exc) or "timed out") from exc
    except httpcore2.ConnectError as exc:
        raise httpx2.ConnectError(str(exc) or "connection failed") from exc
    except httpcore2.RemoteProtocolError as exc:
        raise httpx2.RemoteProtocolError(str(exc) or "protocol error") from exc
    except (
        httpcore2.NetworkError,
        httpcore2.ProtocolError,
        httpcore2.UnsupportedProtocol,
        httpcore2.ProxyError,
    ) as exc:
        raise httpx2.TransportError(str(exc) or type(exc).__name__) from exc


class _Body(httpx2.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx2_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        if hasattr(self._stream, "aclose"):
            await self._stream.aclose()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport over an httpcore2 pool whose connections `_PinnedBackend` makes.
    HTTP/1.1, never through a proxy."""

    def __init__(self, guard: AddressGuard, server: str) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=_ssl_context(),
            max_connections=10,
            network_backend=_PinnedBackend(guard, server),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        core_request = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=cast(httpx2.AsyncByteStream, request.stream),
            extensions=request.extensions,
        )
        with _as_httpx2_errors():
            response = await self._pool.handle_async_request(core_request)
        return httpx2.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def guarded_client(
    guard: AddressGuard, *, server: str, headers: dict[str, str], timeout: httpx2.Timeout
) -> httpx2.AsyncClient:
    """The HTTP client of an untrusted MCP server. ``trust_env=False``: a proxy from the
    environment would connect on the server's behalf and so bypass the guard."""
    return httpx2.AsyncClient(
        transport=GuardedTransport(guard, server),
        trust_env=False,
        headers=headers,
        timeout=timeout,
    )
