"""A small host of "the internet" for the sandbox's network tests, run inside a network
namespace of the test's own: `python internet_host.py ADDRESS NAME`.

It answers HTTP on ADDRESS port 80 with `PAGE`, and DNS queries on ADDRESS port 53 (UDP):
NAME is ADDRESS, any other name does not exist. It prints "ready" once both listen.
"""

from __future__ import annotations

import http.server
import socket
import struct
import sys
import threading

PAGE = b"hello from the internet\n"
_HEADER = struct.Struct(">HHHHHH")
_A, _IN = 1, 1


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads this process's output for "ready" only."""


def answer(query: bytes, name: str, address: str) -> bytes | None:
    """The reply to one DNS query, or None for what is no query."""
    if len(query) < _HEADER.size + 5:
        return None
    ident = struct.unpack(">H", query[:2])[0]
    labels, pos = [], _HEADER.size
    while pos < len(query) and query[pos]:
        length = query[pos]
        labels.append(query[pos + 1 : pos + 1 + length].decode(errors="replace"))
        pos += 1 + length
    pos += 1
    if pos + 4 > len(query):
        return None
    qtype, _ = struct.unpack(">HH", query[pos : pos + 4])
    question = query[_HEADER.size : pos + 4]
    asked = ".".join(labels).lower()
    if asked != name:
        return _HEADER.pack(ident, 0x8183, 1, 0, 0, 0) + question  # no such name
    if qtype != _A:
        return _HEADER.pack(ident, 0x8180, 1, 0, 0, 0) + question  # no such record
    record = b"\xc0\x0c" + struct.pack(">HHIH", _A, _IN, 60, 4) + socket.inet_aton(address)
    return _HEADER.pack(ident, 0x8180, 1, 1, 0, 0) + question + record


def serve_dns(sock: socket.socket, name: str, address: str) -> None:
    while True:
        query, peer = sock.recvfrom(512)
        reply = answer(query, name, address)
        if reply is not None:
            sock.sendto(reply, peer)


def main(address: str, name: str) -> None:
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind((address, 53))
    web = http.server.ThreadingHTTPServer((address, 80), _Page)
    threading.Thread(target=serve_dns, args=(dns, name.lower(), address), daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    web.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
