"""Safety checks shared by every tool: the workspace fence, the exec deny policy, the
network guard (SSRF), output caps.

Every tool takes them from here, so a fix here protects every tool at once.
"""

from agent.tools.guards.commands import check_command
from agent.tools.guards.fence import Workspace
from agent.tools.guards.network import (
    AddressGuard,
    AddressRefused,
    IPAddress,
    Resolver,
    UnresolvableHost,
    address_problem,
    parse_ip_literal,
    system_resolver,
    urls_in,
)
from agent.tools.guards.output import NOISE_DIRS, cap_output, cut_note, is_noise_dir
from agent.tools.tool_errors import GuardError

__all__ = [
    "NOISE_DIRS",
    "AddressGuard",
    "AddressRefused",
    "GuardError",
    "IPAddress",
    "Resolver",
    "UnresolvableHost",
    "Workspace",
    "address_problem",
    "cap_output",
    "check_command",
    "cut_note",
    "is_noise_dir",
    "parse_ip_literal",
    "system_resolver",
    "urls_in",
]
