"""What the hub needs to know about one MCP server, and how to speak of it without secrets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
TRANSPORTS = ("stdio", "http")


@dataclass(frozen=True, slots=True, repr=False)
class McpServerConfig:
    """One MCP server. Hashable and comparable: the hub reconnects when it changes.

    ``env`` (stdio) and ``headers`` (http) may hold secrets: ``repr`` shows their names only.
    ``trusted`` (http) lets the server's connections skip the network guard, which otherwise
    keeps them to public internet addresses as it keeps web_fetch's.
    Raises ``ValueError`` for a name or transport the hub can't use.
    """

    name: str  # [a-z0-9][a-z0-9_-]{0,31}
    transport: str  # "stdio" | "http"
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    tool_timeout: float = 30.0
    cwd: str = ""  # stdio: working directory ("" = the process's)
    trusted: bool = False  # http: may reach loopback and private addresses

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"MCP server name {self.name!r} must match {NAME_PATTERN.pattern}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"MCP server {self.name!r}: transport must be 'stdio' or 'http'")
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"MCP server {self.name!r}: a stdio server needs a command")
        if self.transport == "http" and not self.url:
            raise ValueError(f"MCP server {self.name!r}: an http server needs a url")
        if not self.tool_timeout > 0:
            raise ValueError(f"MCP server {self.name!r}: tool_timeout must be positive")

    def __repr__(self) -> str:
        env = ", ".join(key for key, _ in self.env)
        headers = ", ".join(key for key, _ in self.headers)
        return (
            f"McpServerConfig(name={self.name!r}, transport={self.transport!r}, "
            f"target={self.describe()!r}, env=[{env}], headers=[{headers}], "
            f"tool_timeout={self.tool_timeout!r}, trusted={self.trusted!r})"
        )

    def describe(self) -> str:
        """What the server is, for logs: the program or the URL without credentials or query.
        Arguments are left out, since they may carry tokens."""
        if self.transport == "stdio":
            return f"stdio: {self.command}"
        return f"http: {safe_url(self.url)}"

    def secrets(self) -> tuple[str, ...]:
        """Values that must never reach a log."""
        values = [value for _, value in (*self.env, *self.headers)]
        parts = urlsplit(self.url) if self.url else None
        if parts is not None:
            values += [parts.password or "", parts.username or "", parts.query]
        return tuple(value for value in values if len(value) >= 4)


def safe_url(url: str) -> str:
    """``url`` without userinfo, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<invalid url>"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
