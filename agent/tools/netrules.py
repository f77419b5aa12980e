"""What a sandbox with network may reach: routing rules for its network namespace.

slirp4netns, on the host, turns every connection the sandbox makes into an ordinary socket
of the host's, so an address the sandbox can route to is an address the host connects to.
The rules below are set in the sandbox's own namespace before its command starts, and are
consulted before its routing table: DNS to slirp4netns's resolver (10.0.2.3, port 53 only:
slirp4netns sends every port of that address to the host's name server, or to the host's
loopback when it has none), then `prohibit` (the caller gets EACCES at once) for loopback,
private, link-local and cloud metadata, carrier-grade NAT, documentation, benchmarking,
multicast and reserved ranges, slirp4netns's own network (its gateway is the host), and
every address of the host's own interfaces; and all of IPv6, which the sandbox has none of.

The rules are netlink messages written here by hand (the standard library has no netlink
client), sent through a socket opened inside the namespace; so is the one question asked
before: whether the namespace's loopback is up yet.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.tools.guards.network import CLOUD_ENDPOINT

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DNS_ADDRESS = ipaddress.IPv4Address("10.0.2.3")  # slirp4netns's resolver
DNS_PORT = 53
# Special-purpose IPv4 ranges that are not the public internet (RFC 6890 and its
# successors), and one address of a cloud's own that looks public: Azure's platform
# endpoint (its VM agent's "wire server", DNS, health probes).
BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # this network
        "10.0.0.0/8",  # private, slirp4netns's own network with it
        "100.64.0.0/10",  # carrier-grade NAT (Alibaba Cloud's metadata service too)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata services (169.254.169.254)
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relays, deprecated
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
        f"{CLOUD_ENDPOINT}/32",  # Azure's platform endpoint, as the web tools refuse it
    )
)
ALL_V6 = ipaddress.IPv6Network("::/0")
FIRST_PREFERENCE = 1000  # after the local table's rule (0), before the main table's (32766)

# From linux/netlink.h, linux/rtnetlink.h, linux/if.h and linux/fib_rules.h.
_RTM_NEWLINK, _RTM_GETLINK, _RTM_NEWRULE = 16, 18, 32
_LOOPBACK_INDEX, _IFF_UP = 1, 0x1
_NLMSG_ERROR = 2
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_EXCL, _NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
_FRA_DST, _FRA_PRIORITY, _FRA_TABLE, _FRA_IP_PROTO, _FRA_DPORT_RANGE = 1, 6, 15, 22, 24
_FR_ACT_TO_TBL, _FR_ACT_PROHIBIT = 1, 8
_RT_TABLE_MAIN = 254
_HEADER = struct.Struct("=IHHII")  # nlmsghdr
_LINK = struct.Struct("=BxHiII")  # ifinfomsg
_RULE = struct.Struct("=BBBBBBBBI")  # fib_rule_hdr


class RulesRefused(OSError):
    """The kernel refused a rule; the namespace is not fit to run a command in."""


@dataclass(frozen=True, slots=True)
class Rule:
    """Traffic to `destination` (of `protocol` to `port`, when given) is prohibited, or,
    `allow`, routed as usual."""

    destination: IPNetwork
    allow: bool = False
    protocol: int | None = None
    port: int | None = None


def sandbox_rules(host_addresses: Iterable[ipaddress.IPv4Address]) -> list[Rule]:
    """Every rule of a sandbox's namespace, in the order they apply."""
    dns = ipaddress.IPv4Network(DNS_ADDRESS)
    rules = [
        Rule(dns, allow=True, protocol=socket.IPPROTO_UDP, port=DNS_PORT),
        Rule(dns, allow=True, protocol=socket.IPPROTO_TCP, port=DNS_PORT),
    ]
    rules += [Rule(net) for net in BLOCKED_V4]
    own = {ipaddress.IPv4Network(address) for address in host_addresses}
    rules += [Rule(net) for net in sorted(own) if not any(net.subnet_of(b) for b in BLOCKED_V4)]
    return [*rules, Rule(ALL_V6)]


def host_addresses(fib_trie: Path = Path("/proc/net/fib_trie")) -> set[ipaddress.IPv4Address]:
    """The IPv4 addresses of this host's own interfaces (its local routes), read afresh:
    they change as interfaces come and go."""
    found: set[ipaddress.IPv4Address] = set()
    last = ""
    for line in fib_trie.read_text().splitlines():
        text = line.strip(" |-+`")
        if "/32 host LOCAL" in line:
            found.add(ipaddress.IPv4Address(last))
        elif text and text[0].isdigit() and "/" not in text:
            last = text
    return found


def install(link: socket.socket, rules: list[Rule]) -> None:
    """Add `rules` through `link`, a route netlink socket opened in the namespace; raises
    RulesRefused naming the first rule the kernel refused."""
    messages = [_message(seq, rule, FIRST_PREFERENCE + seq) for seq, rule in enumerate(rules)]
    link.sendall(b"".join(messages))
    pending = set(range(len(rules)))
    while pending:
        data = link.recv(65536)
        if not data:
            raise RulesRefused("the netlink socket closed before every rule was added")
        for kind, seq, payload in _replies(data):
            if kind != _NLMSG_ERROR or seq not in pending:
                continue
            (error,) = struct.unpack_from("=i", payload)
            if error:
                problem = os.strerror(-error)
                raise RulesRefused(-error, f"rule for {rules[seq].destination}: {problem}")
            pending.discard(seq)


def loopback_is_up(link: socket.socket) -> bool:
    """Whether the namespace's loopback (its first interface) is up: bubblewrap brings it
    up, and adds its address, in its last step of the namespace's set-up."""
    body = _LINK.pack(socket.AF_UNSPEC, 0, _LOOPBACK_INDEX, 0, 0)
    link.sendall(_HEADER.pack(_HEADER.size + len(body), _RTM_GETLINK, _NLM_F_REQUEST, 0, 0) + body)
    while True:
        data = link.recv(65536)
        if not data:
            raise RulesRefused("the netlink socket closed before it answered")
        for kind, _, payload in _replies(data):
            if kind == _RTM_NEWLINK:
                return bool(_LINK.unpack_from(payload)[3] & _IFF_UP)
            if kind == _NLMSG_ERROR:
                (error,) = struct.unpack_from("=i", payload)
                raise RulesRefused(-error, f"the loopback's state: {os.strerror(-error)}")


def _message(seq: int, rule: Rule, preference: int) -> bytes:
    net = rule.destination
    family = socket.AF_INET if net.version == 4 else socket.AF_INET6
    action = _FR_ACT_TO_TBL if rule.allow else _FR_ACT_PROHIBIT
    table = _RT_TABLE_MAIN if rule.allow else 0
    body = _RULE.pack(family, net.prefixlen, 0, 0, table, 0, 0, action, 0)
    if net.prefixlen:
        body += _attribute(_FRA_DST, net.network_address.packed)
    body += _attribute(_FRA_PRIORITY, struct.pack("=I", preference))
    if rule.allow:
        body += _attribute(_FRA_TABLE, struct.pack("=I", _RT_TABLE_MAIN))
    if rule.protocol is not None:
        body += _attribute(_FRA_IP_PROTO, struct.pack("=B", rule.protocol))
    if rule.port is not None:
        body += _attribute(_FRA_DPORT_RANGE, struct.pack("=HH", rule.port, rule.port))
    flags = _NLM_F_REQUEST | _NLM_F_ACK | _NLM_F_CREATE | _NLM_F_EXCL
    return _HEADER.pack(_HEADER.size + len(body), _RTM_NEWRULE, flags, seq, 0) + body


def _attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _replies(data: bytes) -> Iterable[tuple[int, int, bytes]]:
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, seq, _ = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size:
            break
        yield kind, seq, data[offset + _HEADER.size : offset + length]
        offset += (length + 3) & ~3
