"""An httpx transport whose every connection goes to an address the network guard checked,
for both HTTP stacks the project carries: httpx and httpcore (web_fetch) and their forks
httpx2 and httpcore2 (the MCP SDK's client), whose API is the same.

The stack comes in as the two module objects, so this module imports neither: each caller
imports its own when it first needs it (web_fetch on its first call, the MCP client when an
untrusted server connects), and the classes are built once per stack.

The module parameters are ``Any``: httpx and httpx2 are two packages that no one static type
describes, and the callers' own client factories give their clients the precise type.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, cast

from agent.tools.guards.network import AddressGuard
from agent.tools.tool_errors import GuardError

Refusal = Callable[[str], str]


@functools.cache
def ssl_context(httpx: Any) -> ssl.SSLContext:
    """The verifying TLS context every client of one stack shares: loading the CA bundle
    costs ~20 ms, and an SSLContext is safe to share across threads and event loops."""
    return cast(ssl.SSLContext, httpx.create_ssl_context())


def guarded_transport(
    httpx: Any,
    httpcore: Any,
    guard: AddressGuard,
    *,
    max_connections: int,
    refusal: Refusal | None = None,
) -> Any:
    """An ``httpx.AsyncBaseTransport`` over an httpcore pool whose connections the guard
    makes. ``refusal``, when given, rewrites the reason of every connection the guard
    refuses (and the refusal is then a plain `GuardError`).

    httpx's own transport takes no network backend, so this one adapts requests to httpcore
    (its public API) itself. It speaks HTTP/1.1 and never goes through a proxy.
    """
    transport = _transport_class(httpx, httpcore)
    return transport(guard, max_connections=max_connections, refusal=refusal)


@functools.cache
def _transport_class(httpx: Any, httpcore: Any) -> Any:
    class PinnedBackend(httpcore.AsyncNetworkBackend):
        """Resolves and checks the host itself, then connects to the checked address
        (`AddressGuard.connect`).

        The host is the one of the request's own URL: no second parse stands between what is
        checked and what is reached. Checking and connecting on the same lookup is what
        defeats DNS rebinding: a name that answers a public address to the check and
        127.0.0.1 to the connect cannot exist here. TLS still verifies the host name:
        httpcore passes the URL's host to `start_tls`.
        """

        def __init__(self, guard: AddressGuard, refusal: Refusal | None) -> None:
            self._guard = guard
            self._refusal = refusal
            self._inner = httpcore.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> Any:
            async def to(address: str) -> Any:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )

            try:
                return await self._guard.connect(
                    host, port, to, (httpcore.ConnectError, httpcore.ConnectTimeout)
                )
            except GuardError as exc:
                if self._refusal is None:
                    raise
                raise GuardError(self._refusal(str(exc))) from None

        async def connect_unix_socket(
            self,
            path: str,
            timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
            socket_options: Iterable[Any] | None = None,
        ) -> Any:
            reason = "unix sockets cannot be reached"
            raise GuardError(self._refusal(reason) if self._refusal else reason)

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    @contextlib.contextmanager
    def translated_errors() -> Iterator[None]:
        # What httpx's own transport does: callers (the MCP SDK and hub, web_fetch) know
        # httpx's family of errors only.
        try:
            yield
        except httpcore.TimeoutException as exc:
            raise httpx.TimeoutException(str(exc) or "timed out") from exc
        except httpcore.ConnectError as exc:
            raise httpx.ConnectError(str(exc) or "connection failed") from exc
        except httpcore.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc) or "protocol error") from exc
        except (
            httpcore.NetworkError,
            httpcore.ProtocolError,
            httpcore.UnsupportedProtocol,
            httpcore.ProxyError,
        ) as exc:
            raise httpx.TransportError(str(exc) or type(exc).__name__) from exc

    class Body(httpx.AsyncByteStream):
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            with translated_errors():
                async for part in self._stream:
                    yield part

        async def aclose(self) -> None:
            if hasattr(self._stream, "aclose"):
                await self._stream.aclose()

    class GuardedTransport(httpx.AsyncBaseTransport):
        def __init__(
            self, guard: AddressGuard, *, max_connections: int, refusal: Refusal | None
        ) -> None:
            self._pool = httpcore.AsyncConnectionPool(
                ssl_context=ssl_context(httpx),
                max_connections=max_connections,
                network_backend=PinnedBackend(guard, refusal),
            )

        async def handle_async_request(self, request: Any) -> Any:
            core_request = httpcore.Request(
                method=request.method,
                url=httpcore.URL(
                    scheme=request.url.raw_scheme,
                    host=request.url.raw_host,
                    port=request.url.port,
                    target=request.url.raw_path,
                ),
                headers=request.headers.raw,
                content=request.stream,
                extensions=request.extensions,
            )
            with translated_errors():
                response = await self._pool.handle_async_request(core_request)
            return httpx.Response(
                status_code=response.status,
                headers=response.headers,
                stream=Body(response.stream),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._pool.aclose()

    return GuardedTransport
