"""The network of an `exec` sandbox that may use one (`AGENT_EXEC_NETWORK`).

bubblewrap gives every sandbox a network namespace of its own, with or without network.
With network, slirp4netns gives that namespace a way out: a tap device whose traffic it
turns into the host's ordinary sockets, with the host's loopback left unmapped
(`--disable-host-loopback`) and DNS answered by forwarding to the host's name server
(10.0.2.3, which the sandbox's own resolv.conf names). Before the command starts, the
namespace gets the rules of `agent.tools.netrules`, which leave it the internet and nothing
of the host, its networks or its cloud; bubblewrap holds the command (`--block-fd`) until
they are in place. The command, in a user namespace below the one that owns its network
namespace, has no capability there with which to change them.

slirp4netns runs with its seccomp filter, and never as root: a site running as root starts
it as the sandbox's own account, in a bubblewrap sandbox of its own (no files but `/usr`,
`resolv.conf` and the tun device). Its own `--enable-sandbox` cannot be used: it needs
root mapped in the namespace it joins, and the sandbox maps its one user only. It ends when
its exit descriptor closes: when the command is over, or when the site goes away.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agent.processes import alive
from agent.tools import netrules

logger = logging.getLogger(__name__)

HELPER_HINT = "install slirp4netns (Debian and Ubuntu: apt install slirp4netns)"
RESOLV_CONF = f"nameserver {netrules.DNS_ADDRESS}\n"
SETUP_SECONDS = 10.0
TAP, MTU = "tap0", 65520
_NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
_SOCKET_SCRIPT = Path(__file__).with_name("netns_socket.py")
_HELPER_EXIT_WAIT = 2.0
# What slirp4netns reads, besides /usr: the host's resolver, the linker's cache.
_HELPER_ETC = ("resolv.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d")


class NetworkSetupFailed(Exception):
    """The sandbox's network could not be set up; its command must not run."""


@dataclass(frozen=True, slots=True)
class NetworkHelper:
    """How this machine starts slirp4netns for a sandbox.

    `run_as` is None when the site runs as an ordinary user: the helper is then that user's.
    Otherwise bwrap and setpriv start it as `run_as`, in a sandbox of its own, whose base
    `filesystem` (bwrap's arguments for /usr and the links into it) the caller gives.
    """

    slirp4netns: str
    bwrap: str
    setpriv: str | None = None
    run_as: int | None = None
    filesystem: tuple[str, ...] = ()

    def argv(self, *, userns_fd: int, netns_fd: int, ready_fd: int, exit_fd: int) -> list[str]:
        slirp = [
            self.slirp4netns,
            "--configure",
            f"--mtu={MTU}",
            "--disable-host-loopback",
            "--enable-seccomp",
            f"--ready-fd={ready_fd}",
            f"--exit-fd={exit_fd}",
            f"--userns-path=/proc/self/fd/{userns_fd}",
            "--netns-type=path",
            f"/proc/self/fd/{netns_fd}",
            TAP,
        ]
        if self.run_as is None or self.setpriv is None:
            return slirp
        etc = [arg for name in _HELPER_ETC for arg in ("--ro-bind-try", *[f"/etc/{name}"] * 2)]
        user = str(self.run_as)
        return [
            self.bwrap,
            *("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"),
            *self.filesystem,
            # Run as root, bwrap makes the folders on the way to a mount its own alone.
            *("--perms", "0755", "--dir", "/etc", *etc),
            *("--proc", "/proc", "--dev", "/dev", "--perms", "0755", "--dir", "/dev/net"),
            *("--dev-bind", "/dev/net/tun", "/dev/net/tun"),
            *("--remount-ro", "/", "--die-with-parent", "--new-session", "--chdir", "/"),
            "--",
            self.setpriv,
            *(f"--reuid={user}", f"--regid={user}", "--clear-groups"),
            *("--inh-caps=-all", "--bounding-set=-all", "--"),
            *slirp,
        ]


class SandboxNetwork:
    """One sandbox's network, from before its bwrap starts until its command is over.

    bwrap gets `bwrap_args()` and inherits `child_fds`; once it runs, `attach` sets the
    network up and lets the command start, and `close`, after the command, ends the helper.
    """

    def __init__(self, helper: NetworkHelper) -> None:
        self.helper = helper
        self._info_read, self._info_write = os.pipe()
        try:
            self._block_read, self._block_write = os.pipe()
        except OSError:
            os.close(self._info_read)
            os.close(self._info_write)
            raise
        self._ready_read: int | None = None
        self._exit_write: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        # Attaching runs in a thread of its own; closing waits for it to finish first.
        self._lock = threading.Lock()
        self._closed = False

    @property
    def child_fds(self) -> tuple[int, ...]:
        return (self._info_write, self._block_read)

    def bwrap_args(self) -> list[str]:
        return ["--info-fd", str(self._info_write), "--block-fd", str(self._block_read)]

    def attach(self, timeout: float = SETUP_SECONDS) -> None:
        """Set the network up and let the command start; raises NetworkSetupFailed.

        Call it once bwrap runs and this process has closed its copies of `child_fds`. On a
        failure, kill the sandbox before `close`: bwrap lets the command start as soon as
        its hold ends, and closing it ends it too.
        """
        with self._lock:
            if self._closed:
                raise NetworkSetupFailed("the command ended before its network was set up")
            try:
                self._attach(time.monotonic() + timeout)
            except OSError as exc:
                raise NetworkSetupFailed(str(exc)) from exc

    def _attach(self, deadline: float) -> None:
        info = self._info(deadline)
        netns, userns = self._namespaces(info)
        try:
            link = self._netlink(userns, netns, deadline)
            try:
                # slirp4netns brings the loopback up too: before bwrap has, that makes
                # bwrap's own set-up of it fail.
                pid = int(info["child-pid"])
                _wait_for(
                    lambda: netrules.loopback_is_up(link) or not alive(pid), deadline, "the sandbox"
                )
                if not alive(pid):
                    raise NetworkSetupFailed("the sandbox ended before its network was set up")
                self._start_helper(userns, netns)
            except BaseException:
                link.close()
                raise
        finally:
            os.close(netns)
            os.close(userns)
        # After slirp4netns's own set-up: its default route names a gateway (10.0.2.2)
        # that the rules make unreachable, and could not be added past them.
        with link:
            self._wait_ready(deadline)
            rules = netrules.sandbox_rules(netrules.host_addresses())
            try:
                netrules.install(link, rules)
            except OSError as exc:
                raise NetworkSetupFailed(f"its rules could not be set: {exc}") from exc
        try:
            os.write(self._block_write, b"1")
        except OSError as exc:
            raise NetworkSetupFailed("the sandbox ended before its command started") from exc

    def close(self) -> None:
        """End the helper and release everything; once the sandbox has ended."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self._info_read, self._block_write, self._ready_read, self._exit_write):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if self._process is not None:
                try:
                    self._process.wait(_HELPER_EXIT_WAIT)
                except subprocess.TimeoutExpired:
                    logger.warning("slirp4netns outlived its sandbox; killed")
                    self._process.kill()
                    self._process.wait()
                self._process = None
            if self._log is not None:
                self._log.close()
                self._log = None

    def _info(self, deadline: float) -> dict[str, Any]:
        """What bwrap says once its sandbox exists: its first process and namespaces."""
        data = b""
        while chunk := _read(self._info_read, deadline, "the sandbox to start"):
            data += chunk
        try:
            info = json.loads(data)
            int(info["child-pid"]), int(info["net-namespace"])
        except (ValueError, KeyError, TypeError):
            raise NetworkSetupFailed("the sandbox ended before its network was set up") from None
        return dict(info)

    def _namespaces(self, info: dict[str, Any]) -> tuple[int, int]:
        """The sandbox's network namespace and the user namespace that owns it, open.

        The one opened must be the one bwrap made: a pid reused meanwhile would otherwise
        lead to some other process's namespace, the host's own perhaps."""
        try:
            netns = os.open(f"/proc/{info['child-pid']}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            raise NetworkSetupFailed("the sandbox ended before its network was set up") from None
        if os.fstat(netns).st_ino != int(info["net-namespace"]):
            os.close(netns)
            raise NetworkSetupFailed("the sandbox ended before its network was set up")
        try:
            userns = fcntl.ioctl(netns, _NS_GET_USERNS)
        except OSError as exc:
            os.close(netns)
            raise NetworkSetupFailed(f"its user namespace cannot be opened: {exc}") from exc
        return netns, userns

    def _start_helper(self, userns: int, netns: int) -> None:
        ready_read, ready_write = os.pipe()
        exit_read, exit_write = os.pipe()
        self._ready_read, self._exit_write = ready_read, exit_write
        # Where slirp4netns writes what went wrong; kept until `close`.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        argv = self.helper.argv(
            userns_fd=userns, netns_fd=netns, ready_fd=ready_write, exit_fd=exit_read
        )
        try:
            self._process = subprocess.Popen(
                argv,
                pass_fds=(userns, netns, ready_write, exit_read),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                env={"PATH": os.defpath},
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            raise NetworkSetupFailed(f"slirp4netns could not start: {exc}") from exc
        finally:
            os.close(ready_write)
            os.close(exit_read)

    def _netlink(self, userns: int, netns: int, deadline: float) -> socket.socket:
        """A route netlink socket opened inside the namespace, by a fresh interpreter."""
        mine, theirs = socket.socketpair()
        with mine:
            with theirs:
                fds = (userns, netns, theirs.fileno())
                try:
                    done = subprocess.run(
                        [sys.executable, "-I", "-S", str(_SOCKET_SCRIPT), *map(str, fds)],
                        pass_fds=fds,
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        env={},
                        timeout=max(deadline - time.monotonic(), 0.1),
                        check=False,
                    )
                except (OSError, subprocess.TimeoutExpired) as exc:
                    raise NetworkSetupFailed(f"its rules could not be set: {exc}") from exc
            if done.returncode != 0:
                reason = last_line(done.stderr) or f"exit status {done.returncode}"
                raise NetworkSetupFailed(f"its rules could not be set: {reason}")
            mine.settimeout(max(deadline - time.monotonic(), 0.1))
            _, passed, _, _ = socket.recv_fds(mine, 16, 1)
        if not passed:
            raise NetworkSetupFailed("its rules could not be set: no netlink socket came back")
        return socket.socket(fileno=passed[0])

    def _wait_ready(self, deadline: float) -> None:
        assert self._ready_read is not None
        if _read(self._ready_read, deadline, "slirp4netns") != b"1":
            if self._process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(1)
            raise NetworkSetupFailed(f"slirp4netns failed: {self._helper_error()}")

    def _helper_error(self) -> str:
        if self._log is None:
            return "it did not start"
        self._log.seek(0)
        lines = [
            line
            for line in self._log.read().decode(errors="replace").splitlines()
            if line.strip() and "tapfd" not in line
        ]
        return lines[-1] if lines else "it ended without saying why"


def _wait_for(done: Callable[[], bool], deadline: float, waiting_for: str) -> None:
    while not done():
        if time.monotonic() > deadline:
            raise NetworkSetupFailed(f"timed out waiting for {waiting_for}")
        time.sleep(0.002)


def _read(fd: int, deadline: float, waiting_for: str) -> bytes:
    """Up to a page from `fd` (b"" at its end), waiting no later than `deadline`."""
    remaining = deadline - time.monotonic()
    if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
        raise NetworkSetupFailed(f"timed out waiting for {waiting_for}")
    return os.read(fd, 4096)


def last_line(data: bytes) -> str:
    """The last line of what a process wrote (its standard error): why it failed."""
    lines = data.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""
