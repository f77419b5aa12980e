"""The network guard (SSRF): which hosts the web tools and URLs in commands may reach."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar
from urllib.parse import unquote_to_bytes, urlsplit

from agent.tools.tool_errors import GuardError

logger = logging.getLogger(__name__)


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Resolves (host, port) to address strings, as getaddrinfo would; raises OSError when the
# name does not resolve. Tests inject one to map names without DNS.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
_METADATA = ipaddress.IPv4Address("169.254.169.254")
# A cloud's own address that looks public: Azure's platform endpoint (its VM agent's "wire
# server", DNS, health probes). exec's sandbox network refuses it too (`netrules`).
CLOUD_ENDPOINT = ipaddress.IPv4Address("168.63.129.16")
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_LOOSE_IPV4_PART = re.compile(r"0x[0-9a-f]*|[0-9]+", re.IGNORECASE)
# What a host name may hold once it is ASCII: letters, digits, '-', '_' and dots, in labels
# of at most 63 characters (DNS's limit), 253 in all.
_NAME = re.compile(r"[a-z0-9_-]{1,63}(\.[a-z0-9_-]{1,63})*\.?")
_NAME_CHARS = 253

T = TypeVar("T")


class UnresolvableHost(GuardError):
    """A host name that resolves to no address at all."""


class AddressRefused(GuardError):
    """A host that is, or resolves to, an address the guard refuses."""

    def __init__(self, host: str, ip: IPAddress, problem: str) -> None:
        self.host, self.ip, self.problem = host, ip, problem
        shown = host if parse_ip_literal(host) is not None else f"{host} ({ip})"
        super().__init__(
            f"{shown} is {_article(problem)} {problem} address; only public internet "
            "addresses may be reached"
        )


def address_problem(ip: IPAddress) -> str | None:
    """What makes ``ip`` an address the web tools must not reach (``"loopback"``,
    ``"private"`` ...), or None for a public one.

    ``is_global`` alone is not enough: Python 3.11 calls ``::ffff:127.0.0.1``, ``fec0::1``,
    6to4 and NAT64 forms of private addresses global, so embeddings are unwrapped first and
    the named ranges are checked one by one.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = address_problem(embedded)
            return f"{inner} (IPv4 {embedded} embedded in IPv6)" if inner else None
        if ip.is_site_local:
            return "site-local"
        if ip in _UNIQUE_LOCAL:
            return "unique-local"
        if ip in _LOCAL_NAT64:
            return "local-use NAT64"
    if ip.is_unspecified or ip in _THIS_NETWORK:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip == _METADATA:
        return "link-local (cloud metadata service)"
    if ip == CLOUD_ENDPOINT:
        return "cloud platform endpoint"
    if ip.is_link_local:
        return "link-local"
    if ip in _CGNAT:
        return "carrier-grade NAT"
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-public"
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address that an IPv4-mapped, IPv4-compatible, 6to4 or NAT64 address stands
    for: connecting to it reaches that IPv4 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are IPv6's own
        return ipaddress.IPv4Address(int(ip))
    return None


def canonical_host(host: str) -> str:
    """``host`` as a connection to it would read it, so that the guard checks that and
    nothing else: percent-escapes decoded, a name in its ASCII (IDNA) form and lower case,
    an address in its usual spelling (``2130706433``, ``0x7f.1``, ``%31%32%37.0.0.1`` and
    ``１２７.０.０.１`` are all ``127.0.0.1``; ``ⓛocalhost`` is ``localhost``).

    The IDNA step is Python's own codec, the one `socket.getaddrinfo` applies to a name,
    so the system resolver looks up exactly the name returned here. Raises
    `UnresolvableHost` for a host that is no valid name or address (a stray ``@``, ``\\``,
    ``/``, space or control character), which no connection could use either.
    """
    text = host.strip()
    literal = parse_ip_literal(text)
    if literal is not None:
        return str(literal)
    try:
        text = unquote_to_bytes(text).decode("utf-8")
        if not text.isascii():
            text = text.encode("idna").decode("ascii")
    except (UnicodeError, ValueError):
        raise UnresolvableHost(f"{_shown(host)} is not a valid host name") from None
    literal = parse_ip_literal(text)
    if literal is not None:
        return str(literal)
    text = text.lower()
    if not _NAME.fullmatch(text) or len(text.rstrip(".")) > _NAME_CHARS:
        raise UnresolvableHost(f"{_shown(host)} is not a valid host name")
    return text


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells directly, or None for a name.

    Besides the usual forms this accepts what ``inet_aton`` (and so curl, and
    getaddrinfo) does: ``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``.
    """
    text = host.strip().removeprefix("[").removesuffix("]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    return _loose_ipv4(text)


def _loose_ipv4(text: str) -> ipaddress.IPv4Address | None:
    parts = text.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()  # a fully qualified "127.0.0.1."
    if not 1 <= len(parts) <= 4 or not all(_LOOSE_IPV4_PART.fullmatch(p) for p in parts):
        return None
    numbers: list[int] = []
    for part in parts:
        if part[:2].lower() == "0x":
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not set(part) <= set("01234567"):
                return None
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *leading, last = numbers
    # The last part fills every byte the others left, as in "127.1" or "2130706433".
    if any(n > 255 for n in leading) or last >= 256 ** (4 - len(leading)):
        return None
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address getaddrinfo gives for ``host`` (IPv4 and IPv6), off the event loop."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class AddressGuard:
    """Decides which hosts the web tools (and URLs in ``exec`` commands) may reach.

    By default only public addresses: a host is allowed when every address it resolves to
    is. ``allow_private`` lifts that; ``is_allowed`` replaces the policy for one address
    and ``resolver`` the name lookup (tests use both to play a network without DNS).
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        is_allowed: Callable[[IPAddress], bool] | None = None,
        resolver: Resolver | None = None,
        resolve_timeout: float = 10.0,
    ) -> None:
        self.allow_private = allow_private
        self._is_allowed = is_allowed
        self._resolver: Resolver = resolver or system_resolver
        self.resolve_timeout = resolve_timeout

    @property
    def allows_everything(self) -> bool:
        return self.allow_private and self._is_allowed is None

    def refusal(self, ip: IPAddress) -> str | None:
        """Why ``ip`` may not be reached, or None when it may."""
        if self._is_allowed is not None:
            return None if self._is_allowed(ip) else (address_problem(ip) or "disallowed")
        if self.allow_private:
            return None
        return address_problem(ip)

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """The addresses to connect to for ``host``: all of them checked, none refused.

        ``host`` is read as `canonical_host` reads it, so an escaped or internationalised
        spelling is checked as the address it stands for. Raises `GuardError` naming the
        first refused address, `UnresolvableHost` when the name has no address.
        """
        host = canonical_host(host)
        literal = parse_ip_literal(host)
        if literal is not None:
            addresses = [literal]
        else:
            addresses = await self._lookup(host, port)
        for ip in addresses:
            problem = self.refusal(ip)
            if problem is not None:
                logger.warning("network guard refused %s (%s): %s address", host, ip, problem)
                raise AddressRefused(host, ip, problem)
        return addresses

    async def connect(
        self,
        host: str,
        port: int,
        connect: Callable[[str], Awaitable[T]],
        retry_on: tuple[type[BaseException], ...],
    ) -> T:
        """``connect(address)`` to the first address of ``host`` that answers, each one
        checked by `resolve` beforehand: what an HTTP client's network backend calls, so
        that the address checked is the address connected to (a name that answers the
        check with a public address and the connect with 127.0.0.1, DNS rebinding, gains
        nothing). ``retry_on`` are the failures after which the next address is tried."""
        failure: BaseException | None = None
        for ip in await self.resolve(host, port):
            try:
                return await connect(str(ip))
            except retry_on as exc:
                failure = exc
        assert failure is not None  # resolve() never returns an empty list
        raise failure

    async def _lookup(self, host: str, port: int) -> list[IPAddress]:
        name = host.rstrip(".") or host
        try:
            async with asyncio.timeout(self.resolve_timeout):
                found = await self._resolver(name, port)
        except TimeoutError:
            raise UnresolvableHost(f"looking up {host} took too long") from None
        except (OSError, UnicodeError, ValueError) as exc:
            logger.info("looking up %s failed: %r", host, exc)
            raise UnresolvableHost(f"cannot resolve host {host!r}: {_reason(exc)}") from None
        addresses: list[IPAddress] = []
        for text in found:
            ip = parse_ip_literal(text)
            if ip is not None and ip not in addresses:
                addresses.append(ip)
        if not addresses:
            raise UnresolvableHost(f"cannot resolve host {host!r}: no address found")
        return addresses

    async def check_command_urls(self, command: str) -> None:
        """Refuse a shell command whose http(s) URLs point at an address that may not be
        reached. A tripwire like `check_command`: it sees URLs written out with their
        scheme, not ``curl 10.0.0.1`` or hosts built by the shell."""
        if self.allows_everything:
            return
        for url in urls_in(command):
            target = _host_and_port(url)
            if target is None:
                continue
            try:
                await self.resolve(*target)
            except UnresolvableHost:
                # The command cannot reach a name that does not resolve either.
                continue
            except AddressRefused as exc:
                raise GuardError(
                    f"command refused: {url} points to {_article(exc.problem)} {exc.problem} "
                    f"address ({exc.ip}); commands may only reach public internet addresses"
                ) from None


# A URL as written in a shell command: it ends at whitespace, a quote or shell syntax.
_URL_IN_TEXT = re.compile(r"""\bhttps?://[^\s'"`<>|;&(){}\\]+""", re.IGNORECASE)


def urls_in(text: str) -> list[str]:
    """The http(s) URLs written out in ``text``."""
    return [match.group(0) for match in _URL_IN_TEXT.finditer(text)]


def _host_and_port(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if not host or "$" in host:  # built by the shell: nothing to check here
        return None
    return host, port or (443 if parts.scheme.lower() == "https" else 80)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


# getaddrinfo's answers that mean the name has no address, on Linux and elsewhere.
_NO_SUCH_NAME = {
    getattr(socket, name)
    for name in ("EAI_NONAME", "EAI_NODATA", "EAI_ADDRFAMILY")
    if hasattr(socket, name)
}


def _reason(exc: BaseException) -> str:
    """Why a lookup failed, in words of ours: the resolver's and the codecs' own ("encoding
    with 'idna' codec failed (UnicodeError: label empty or too long)") go to the log."""
    if isinstance(exc, UnicodeError | ValueError):
        return "it is not a valid host name"
    if isinstance(exc, socket.gaierror):
        if exc.errno in _NO_SUCH_NAME:
            return "no such host name"
        if exc.errno == getattr(socket, "EAI_AGAIN", None):
            return "the name server did not answer; try again later"
    return "the name could not be looked up"


def _shown(host: str) -> str:
    """`host` quoted for a message, cut short when it is long."""
    return repr(host if len(host) <= 100 else host[:99] + "…")
