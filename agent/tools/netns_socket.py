"""Opens a route netlink socket inside a sandbox's network namespace and hands it back.

Run by a fresh interpreter, `python -I -S netns_socket.py USERNS NETNS CHANNEL`, with the
three descriptors inherited: the sandbox's user namespace, its network namespace, and a
Unix socket the socket goes back through. Joining a user namespace takes a process of a
single thread, which the site's own never is; the socket opened here keeps the namespace's
privileges for whoever holds it, so the site then sets the rules itself. The standard
library only, and nothing of the project: `-I -S` leaves both out of reach.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def main(argv: list[str]) -> int:
    userns, netns, channel = (int(arg) for arg in argv)
    libc = ctypes.CDLL(None, use_errno=True)
    for fd, kind, name in ((userns, CLONE_NEWUSER, "user"), (netns, CLONE_NEWNET, "network")):
        if libc.setns(fd, kind) != 0:
            error = ctypes.get_errno()
            sys.stderr.write(f"cannot join the sandbox's {name} namespace: {os.strerror(error)}\n")
            return 1
    link = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    with socket.socket(fileno=channel) as back:
        socket.send_fds(back, [b"netlink"], [link.fileno()])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
