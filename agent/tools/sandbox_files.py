"""What a sandboxed command sees of the host: which files, under which names, and which of
the server's environment. `agent.tools.sandbox` builds its command line from these parts."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

USER, UID, HOME = "agent", 1000, "/tmp"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# What a shell and common tools read in /etc: the dynamic linker's cache, the name service
# and resolver files, time zones, certificates, Debian's alternatives links. Nothing with
# credentials; /etc/passwd and /etc/group are made up for the sandbox's one user.
_ETC = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
    "nsswitch.conf", "host.conf", "hosts", "resolv.conf", "gai.conf", "protocols",
    "services", "ssl", "ca-certificates", "pki", "crypto-policies", "mime.types", "magic",
)  # fmt: skip
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
PASSWD = (
    f"root:x:0:0:root:/root:/usr/sbin/nologin\n{USER}:x:{UID}:{UID}:{USER}:{HOME}:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = f"root:x:0:\n{USER}:x:{UID}:\nnogroup:x:65534:\n"
# Of the server's environment, only the locale and the time zone reach the sandbox.
_KEPT_VARIABLES = re.compile(r"LANG|LANGUAGE|LC_[A-Z_]+|TZ")


def filesystem(workspace: Path, size: int, files: Mapping[str, int]) -> list[str]:
    """bwrap's arguments for the sandbox's files: system files read-only, private /proc,
    /dev and /tmp (`size` bytes), the workspace writable, and `files` (destination: a
    descriptor holding its text) over whatever of /etc they replace."""
    return [
        *("--ro-bind", "/usr", "/usr", *system_dirs(), *etc_files(skip=set(files))),
        *(arg for dest, fd in files.items() for arg in ("--ro-bind-data", str(fd), dest)),
        *("--proc", "/proc", "--dev", "/dev"),
        *("--size", str(size), "--tmpfs", "/tmp", "--size", str(size), "--tmpfs", "/dev/shm"),
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


def visible_inside(path: Path) -> bool:
    """Whether the program at `path` is among the files a sandbox sees."""
    real = path.resolve()
    return real.is_relative_to("/usr") or real.parent.name in SYSTEM_DIRS


def system_dirs() -> list[str]:
    """`/bin`, `/lib`…: links into /usr on a merged-/usr system, read-only copies otherwise."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def etc_files(*, skip: set[str]) -> list[str]:
    args: list[str] = []
    for name in _ETC:
        path = f"/etc/{name}"
        if path not in skip:
            args += ["--ro-bind-try", path, path]
    return args


def data_fd(text: str) -> int:
    """A pipe's read end holding `text`; bwrap copies it into a file of the sandbox."""
    read, write = os.pipe()
    try:
        os.write(write, text.encode())
    finally:
        os.close(write)
    return read
