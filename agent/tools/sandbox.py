"""The fence around `exec`: each command runs in a bubblewrap sandbox of its own.

Inside, the workspace is the only writable place of the host and, besides it, only what a
shell needs is there to read: `/usr` (with the `/bin`, `/lib` links) and a short list of
`/etc` files. There is a private `/proc` (the server's processes do not exist in it), a
minimal `/dev`, a private size-capped `/tmp` that vanishes with the command, an environment
without secrets, and a network namespace of its own: empty, or, when a setting allows it,
one that reaches the internet and nothing of the host (`agent.tools.sandbox_net`). Limits
on processes (threads included), memory, CPU time and file size are set by `prlimit`
before the shell starts, and where the site may make cgroups (as root) each command gets
one too, which caps its processes and memory together. The sandbox is a PID namespace, so
every process the command starts dies with it: when the shell exits, when the call times
out, or when the server goes away.

The sandbox's user is never root on the host. bubblewrap maps it onto the account that
starts bubblewrap: the site's own, or, when the site runs as root, an account of the
sandbox's own (`Limits.host_uid`), which bubblewrap and the network helper are started as.
That account must be able to pass through the folders above the workspace to reach it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.conf_declared import EXEC_UID as HOST_UID
from agent.tools.cgroups import Cgroup, CgroupParent, find_parent
from agent.tools.sandbox_files import (
    GROUP,
    PASSWD,
    PATH,
    UID,
    data_fd,
    filesystem,
    sandbox_env,
    system_dirs,
    visible_inside,
)
from agent.tools.sandbox_net import (
    HELPER_HINT,
    RESOLV_CONF,
    NetworkHelper,
    NetworkSetupFailed,
    SandboxNetwork,
    last_line,
)

logger = logging.getLogger(__name__)

INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: apt install bubblewrap)"
FILE_SIZE_LIMIT = 1 << 30  # bytes any one file may grow to
OPEN_FILES = 1024
PROBE_SECONDS = 20


class SandboxUnavailable(Exception):
    """No working sandbox on this machine; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one `exec` call may use, and as whom."""

    max_processes: int = 128
    memory_mb: int = 1024
    network: bool = False
    # The host account (uid and gid) commands run as when the site runs as root.
    host_uid: int = HOST_UID

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb * 1024 * 1024


@dataclass(slots=True)
class Launch:
    """One sandboxed command ready to start: its argv, the descriptors it inherits, and
    what lives as long as it does (its cgroup, its network).

    `spawned` once it runs; `close` once it has exited: it ends the network's helper and
    releases the cgroup.
    """

    argv: list[str]
    pass_fds: tuple[int, ...]
    cgroup: Cgroup | None = None
    network: SandboxNetwork | None = None

    def spawned(self) -> None:
        """Close this process's copies of the descriptors the command inherited."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()

    def close(self) -> None:
        self.spawned()
        if self.network is not None:
            self.network.close()
            self.network = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None


@dataclass(frozen=True, slots=True)
class Sandbox:
    bwrap: str
    prlimit: str
    cgroups: CgroupParent | None
    as_root: bool
    # As root: what starts bubblewrap and the helper as the sandbox's own account.
    setpriv: str | None = None
    # slirp4netns, where installed: commands may have network only with it.
    slirp4netns: str | None = None

    def prepare(
        self,
        command: str,
        *,
        workspace: Path,
        cwd: Path,
        cpu_seconds: int,
        limits: Limits,
        env: Mapping[str, str],
    ) -> Launch:
        """The command line that runs `command` in a fresh sandbox. Whatever it made is
        released again when it fails part way (descriptors run out, a cgroup cannot be made):
        a failure for want of descriptors must not leave fewer still."""
        helper = self.helper(limits) if limits.network else None
        launch = Launch(argv=[], pass_fds=())
        try:
            if self.cgroups is not None:
                launch.cgroup = self.cgroups.create(
                    max_processes=limits.max_processes, memory_bytes=limits.memory_bytes
                )
            network = launch.network = SandboxNetwork(helper) if helper is not None else None
            if network is not None:
                launch.pass_fds = network.child_fds
            files = {"/etc/passwd": PASSWD, "/etc/group": GROUP}
            if network is not None:
                files["/etc/resolv.conf"] = RESOLV_CONF
            fds: dict[str, int] = {}
            for dest, text in files.items():
                fds[dest] = data_fd(text)
                launch.pass_fds = (*launch.pass_fds, fds[dest])
            argv = [
                self.bwrap,
                *self._namespaces(),
                *(network.bwrap_args() if network is not None else ()),
                *filesystem(workspace, limits.memory_bytes, fds),
                "--chdir",
                str(cwd),
                "--clearenv",
                *(arg for item in sandbox_env(env).items() for arg in ("--setenv", *item)),
                "--",
                *self._limits(limits, cpu_seconds),
                "/bin/sh",
                "-c",
                command,
            ]
            launch.argv = _join(launch.cgroup, self._as_host_user(limits, argv))
        except BaseException:
            launch.close()
            raise
        return launch

    def helper(self, limits: Limits) -> NetworkHelper:
        """How a sandbox with `limits` gets its network; SandboxUnavailable where it cannot."""
        if self.slirp4netns is None:
            raise SandboxUnavailable(f"slirp4netns is not installed: {HELPER_HINT}")
        return NetworkHelper(
            slirp4netns=self.slirp4netns,
            bwrap=self.bwrap,
            setpriv=self.setpriv,
            run_as=limits.host_uid if self.as_root else None,
            filesystem=("--ro-bind", "/usr", "/usr", *system_dirs()),
        )

    def host_uid(self, limits: Limits) -> int | None:
        """The account a command runs as on the host when it is not the site's own."""
        return limits.host_uid if self.as_root else None

    def _namespaces(self) -> list[str]:
        """Its own of everything, the network too, as an unprivileged user."""
        return [
            *("--unshare-all", "--unshare-user", "--disable-userns"),
            *("--uid", str(UID), "--gid", str(UID), "--hostname", "sandbox"),
            *("--die-with-parent", "--new-session"),
        ]

    def _as_host_user(self, limits: Limits, argv: list[str]) -> list[str]:
        """As root, `argv` started as the sandbox's own account, with no groups."""
        uid = self.host_uid(limits)
        if uid is None or self.setpriv is None:
            return argv
        return [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]

    def _limits(self, limits: Limits, cpu_seconds: int) -> list[str]:
        """`prlimit`, which sets the limits and then becomes the shell."""
        return [
            self.prlimit,
            f"--nproc={limits.max_processes}",
            f"--data={limits.memory_bytes}",
            f"--cpu={cpu_seconds}",
            f"--fsize={FILE_SIZE_LIMIT}",
            f"--nofile={OPEN_FILES}",
            "--core=0",
        ]


def find_sandbox(*, host_uid: int = HOST_UID) -> Sandbox:
    """This machine's sandbox; raises SandboxUnavailable saying why there is none.

    The first call tries the sandbox out (tens of milliseconds); from async code, call it
    through `asyncio.to_thread`.
    """
    found = _probe(host_uid)
    if isinstance(found, str):
        raise SandboxUnavailable(found)
    return found


def network_problem(*, host_uid: int = HOST_UID) -> str | None:
    """Why a sandbox cannot have a network of its own here, or None when it can. The first
    call tries one out (a hundred milliseconds or so); call it as `find_sandbox`."""
    found = _probe(host_uid)
    return found if isinstance(found, str) else _probe_network(found, host_uid)


def unavailable_reason(*, host_uid: int = HOST_UID) -> str | None:
    """Why `exec` cannot be fenced here, or None when it can."""
    found = _probe(host_uid)
    return found if isinstance(found, str) else None


def startup_warning(
    *, restrict: bool, network: bool = False, host_uid: int = HOST_UID
) -> str | None:
    """What the site says when it starts without a sandbox for `exec`, if anything."""
    if not restrict:
        return None
    reason = unavailable_reason(host_uid=host_uid)
    if reason is not None:
        return (
            f"exec is disabled: shell commands need a sandbox and there is none ({reason}). "
            "The other tools work. Turning AGENT_RESTRICT_TO_WORKSPACE off runs commands "
            "unfenced instead."
        )
    reason = network_problem(host_uid=host_uid) if network else None
    if reason is not None:
        return (
            f"exec is disabled: AGENT_EXEC_NETWORK is on, but a sandboxed command cannot "
            f"have a network of its own here ({reason}), and never gets the host's. The "
            "other tools work. Turning AGENT_EXEC_NETWORK off runs commands without network."
        )
    return None


def network_helper_missing() -> str | None:
    """Why sandboxed commands could never have network here, found without trying one."""
    if shutil.which("slirp4netns") is None:
        return f"slirp4netns is not installed: {HELPER_HINT}"
    return None


def out_of_reach(folder: Path, uid: int) -> Path | None:
    """The first folder on the way to `folder` (or `folder` itself) that the account
    `uid` (its group `uid`, no others) may not pass through, or None: bubblewrap, started
    as that account, must reach the folder it binds. Permission bits only; no ACLs."""
    for path in (*reversed(folder.parents), folder):
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return None  # the site makes it when it is needed
        except OSError:
            return path
        if info.st_uid == uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid == uid:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return path
    return None


@functools.cache
def _probe(host_uid: int) -> Sandbox | str:
    """Find bubblewrap and prlimit and run one command through them, once per process."""
    bwrap, prlimit = shutil.which("bwrap"), shutil.which("prlimit")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    if prlimit is None or not visible_inside(Path(prlimit)):
        return "prlimit (util-linux) is not installed under /usr"
    as_root = os.geteuid() == 0
    setpriv = shutil.which("setpriv") if as_root else None
    if as_root and (setpriv is None or not visible_inside(Path(setpriv))):
        return (
            "the site runs as root, and setpriv (util-linux), which starts the sandbox as "
            "an account of its own, is not installed under /usr"
        )
    slirp4netns = shutil.which("slirp4netns")
    sandbox = Sandbox(
        bwrap=bwrap,
        # Where the sandboxes see them: a link to one may be elsewhere.
        prlimit=str(Path(prlimit).resolve()),
        cgroups=find_parent(),
        as_root=as_root,
        setpriv=str(Path(setpriv).resolve()) if setpriv is not None else None,
        slirp4netns=slirp4netns,
    )
    problem = _try(sandbox, Limits(host_uid=host_uid))
    if problem:
        return f"bubblewrap does not work here ({problem})"
    logger.info("exec runs in a bubblewrap sandbox (%s)", bwrap)
    return sandbox


@functools.cache
def _probe_network(sandbox: Sandbox, host_uid: int) -> str | None:
    """Why `sandbox` cannot have a network (tried once per process), or None."""
    limits = Limits(host_uid=host_uid, network=True)
    try:
        sandbox.helper(limits)
    except SandboxUnavailable as exc:
        return str(exc)
    problem = _try(sandbox, limits)
    if problem:
        return f"a sandbox could not have a network here: {problem}"
    logger.info("sandboxed commands may have a network, through %s", sandbox.slirp4netns)
    return None


def _try(sandbox: Sandbox, limits: Limits) -> str | None:
    """Run one command in the sandbox; what went wrong, if anything."""
    with tempfile.TemporaryDirectory(dir="/tmp" if sandbox.as_root else None) as folder:
        root = Path(folder).resolve()
        uid = sandbox.host_uid(limits)
        if uid is not None:
            os.chown(root, uid, uid)
        try:
            launch = sandbox.prepare(
                "test -w .", workspace=root, cwd=root, cpu_seconds=5, limits=limits, env={}
            )
        except OSError as exc:
            return str(exc)
        try:
            return _run_trial(launch)
        finally:
            launch.close()


def _run_trial(launch: Launch) -> str | None:
    try:
        proc = subprocess.Popen(
            launch.argv,
            pass_fds=launch.pass_fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={"PATH": PATH},
            start_new_session=True,
        )
    except OSError as exc:
        return str(exc)
    launch.spawned()
    try:
        if launch.network is not None:
            launch.network.attach()
        _, err = proc.communicate(timeout=PROBE_SECONDS)
    except (NetworkSetupFailed, subprocess.TimeoutExpired) as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        return last_line(err) or str(exc)
    if proc.returncode != 0:
        return last_line(err) or f"exit status {proc.returncode}"
    return None


def _join(cgroup: Cgroup | None, argv: list[str]) -> list[str]:
    """Prefix `argv` with a shell that moves itself into `cgroup`, then becomes `argv`.

    Joining before bwrap starts means every process of the sandbox is born inside it (and,
    as root, before it becomes the sandbox's account, which may not write there).
    """
    if cgroup is None:
        return argv
    script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", script, "join-cgroup", *map(str, cgroup.procs_files), "--", *argv]
