"""The fence around `exec`: each command runs in a bubblewrap sandbox of its own.

Inside, the workspace is the only writable place of the host and, besides it, only what a
shell needs is there to read: `/usr` (with the `/bin`, `/lib` links) and a short list of
`/etc` files. There is a private `/proc` (the server's processes do not exist in it), a
minimal `/dev`, a private size-capped `/tmp` that vanishes with the command, no network
unless a setting allows it, and an environment without secrets. Limits on processes
(threads included), memory, CPU time and file size are set by `prlimit` before the shell
starts; a server running as root, to which the kernel does not apply the process limit,
adds a cgroup. The sandbox is a PID namespace, so every process the command starts dies
with it: when the shell exits, when the call times out, or when the server goes away.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.tools.cgroups import Cgroup, CgroupParent, find_parent

logger = logging.getLogger(__name__)

INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: apt install bubblewrap)"
USER, UID, HOME = "agent", 1000, "/tmp"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FILE_SIZE_LIMIT = 1 << 30  # bytes any one file may grow to
OPEN_FILES = 1024
PROBE_SECONDS = 20

# What a shell and common tools read in /etc: the dynamic linker's cache, the name service
# and resolver files, time zones, certificates, Debian's alternatives links. Nothing with
# credentials; /etc/passwd and /etc/group are made up for the sandbox's one user.
_ETC = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
    "nsswitch.conf", "host.conf", "hosts", "resolv.conf", "gai.conf", "protocols",
    "services", "ssl", "ca-certificates", "pki", "crypto-policies", "mime.types", "magic",
)  # fmt: skip
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_PASSWD = (
    f"root:x:0:0:root:/root:/usr/sbin/nologin\n{USER}:x:{UID}:{UID}:{USER}:{HOME}:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
_GROUP = f"root:x:0:\n{USER}:x:{UID}:\nnogroup:x:65534:\n"
# Of the server's environment, only the locale and the time zone reach the sandbox.
_KEPT_VARIABLES = re.compile(r"LANG|LANGUAGE|LC_[A-Z_]+|TZ")


class SandboxUnavailable(Exception):
    """No working sandbox on this machine; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one `exec` call may use."""

    max_processes: int = 128
    memory_mb: int = 1024
    network: bool = False

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb * 1024 * 1024


@dataclass(slots=True)
class Launch:
    """One sandboxed command ready to start: its argv and the descriptors it inherits.

    `close` once the process has exited: it releases the descriptors and the cgroup.
    """

    argv: list[str]
    pass_fds: tuple[int, ...]
    cgroup: Cgroup | None = None

    def close(self) -> None:
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None


@dataclass(frozen=True, slots=True)
class Sandbox:
    bwrap: str
    prlimit: str
    cgroups: CgroupParent | None
    as_root: bool

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
        """The command line that runs `command` in a fresh sandbox."""
        cgroup = (
            self.cgroups.create(
                max_processes=limits.max_processes, memory_bytes=limits.memory_bytes
            )
            if self.cgroups is not None
            else None
        )
        fds = (_data_fd(_PASSWD), _data_fd(_GROUP))
        argv = [
            self.bwrap,
            *self._namespaces(limits),
            *_filesystem(workspace, limits, passwd_fd=fds[0], group_fd=fds[1]),
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
        return Launch(_join(cgroup, argv), fds, cgroup)

    def _namespaces(self, limits: Limits) -> list[str]:
        """Its own of everything (network too, unless allowed), as an unprivileged user."""
        args = ["--unshare-all", *(["--share-net"] if limits.network else [])]
        args += ["--unshare-user", "--disable-userns", "--uid", str(UID), "--gid", str(UID)]
        args += ["--hostname", "sandbox", "--die-with-parent", "--new-session"]
        return args + (["--cap-drop", "ALL"] if self.as_root else [])

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


def _filesystem(workspace: Path, limits: Limits, *, passwd_fd: int, group_fd: int) -> list[str]:
    """System files read-only, private /proc, /dev and /tmp, the workspace writable."""
    size = str(limits.memory_bytes)
    return [
        *("--ro-bind", "/usr", "/usr", *_system_dirs(), *_etc_files()),
        *("--ro-bind-data", str(passwd_fd), "/etc/passwd"),
        *("--ro-bind-data", str(group_fd), "/etc/group"),
        *("--proc", "/proc", "--dev", "/dev"),
        *("--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm"),
        *("--bind", str(workspace), str(workspace)),
        # /dev keeps its device nodes writable (/dev/null) but takes no new files.
        *("--remount-ro", "/dev", "--remount-ro", "/"),
    ]


def sandbox_env(server_env: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a sandboxed command."""
    env = {
        "PATH": PATH,
        "HOME": HOME,
        "TMPDIR": "/tmp",
        "USER": USER,
        "LOGNAME": USER,
        "SHELL": "/bin/sh",
        "TERM": "dumb",
        "LANG": "C.UTF-8",
    }
    env.update({k: v for k, v in server_env.items() if _KEPT_VARIABLES.fullmatch(k)})
    return env


def find_sandbox() -> Sandbox:
    """This machine's sandbox; raises SandboxUnavailable saying why there is none.

    The first call tries the sandbox out (tens of milliseconds); from async code, call it
    through `asyncio.to_thread`.
    """
    found = _probe()
    if isinstance(found, str):
        raise SandboxUnavailable(found)
    return found


def unavailable_reason() -> str | None:
    """Why `exec` cannot be fenced here, or None when it can."""
    found = _probe()
    return found if isinstance(found, str) else None


def startup_warning(*, restrict: bool) -> str | None:
    """What the site says when it starts without a sandbox for `exec`, if anything."""
    reason = unavailable_reason() if restrict else None
    if reason is None:
        return None
    return (
        f"exec is disabled: shell commands need a sandbox and there is none ({reason}). "
        "The other tools work. Turning AGENT_RESTRICT_TO_WORKSPACE off runs commands "
        "unfenced instead."
    )


@functools.cache
def _probe() -> Sandbox | str:
    """Find bubblewrap and prlimit and run one command through them, once per process."""
    bwrap, prlimit = shutil.which("bwrap"), shutil.which("prlimit")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    if prlimit is None or not _visible_inside(Path(prlimit)):
        return "prlimit (util-linux) is not installed under /usr"
    as_root = os.geteuid() == 0
    cgroups = find_parent()
    if as_root and cgroups is None:
        return (
            "the site runs as root, where the kernel does not apply the process limit, and "
            "it cannot make a cgroup with one here: run the site as an ordinary user"
        )
    sandbox = Sandbox(bwrap=bwrap, prlimit=prlimit, cgroups=cgroups, as_root=as_root)
    problem = _try(sandbox)
    if problem:
        return f"bubblewrap does not work here ({problem})"
    logger.info("exec runs in a bubblewrap sandbox (%s)", bwrap)
    return sandbox


def _try(sandbox: Sandbox) -> str | None:
    """Run one command in the sandbox; what went wrong, if anything."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        try:
            launch = sandbox.prepare(
                "test -w .", workspace=root, cwd=root, cpu_seconds=5, limits=Limits(), env={}
            )
        except OSError as exc:
            return str(exc)
        try:
            done = subprocess.run(
                launch.argv,
                pass_fds=launch.pass_fds,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={"PATH": PATH},
                timeout=PROBE_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        finally:
            launch.close()
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exit status {done.returncode}"
    return None


def _visible_inside(path: Path) -> bool:
    real = path.resolve()
    return real.is_relative_to("/usr") or real.parent.name in _SYSTEM_DIRS


def _system_dirs() -> list[str]:
    """`/bin`, `/lib`…: links into /usr on a merged-/usr system, read-only copies otherwise."""
    args: list[str] = []
    for name in _SYSTEM_DIRS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _etc_files() -> list[str]:
    args: list[str] = []
    for name in _ETC:
        path = f"/etc/{name}"
        args += ["--ro-bind-try", path, path]
    return args


def _data_fd(text: str) -> int:
    """A pipe's read end holding `text`; bwrap copies it into a file of the sandbox."""
    read, write = os.pipe()
    try:
        os.write(write, text.encode())
    finally:
        os.close(write)
    return read


def _join(cgroup: Cgroup | None, argv: list[str]) -> list[str]:
    """Prefix `argv` with a shell that moves itself into `cgroup`, then becomes `argv`.

    Joining before bwrap starts means every process of the sandbox is born inside it.
    """
    if cgroup is None:
        return argv
    script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", script, "join-cgroup", *map(str, cgroup.procs_files), "--", *argv]
