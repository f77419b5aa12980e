"""Per-command cgroups for the `exec` sandbox, where the server may make them.

`RLIMIT_NPROC`, which the sandbox sets, caps each command's processes: the kernel counts
them in the sandbox's own user namespace, and never runs a sandbox as root, to which it
would not apply. Where the server may make cgroups (as root), each command gets one of its
own as well, with `pids.max` (and, when the memory controller is there too, a memory limit
for all of the command's processes together, which the per-process limit is not). Both
cgroup versions work: v1 with a hierarchy per controller, v2 where this process's cgroup
may enable controllers for its children.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from agent.processes import alive

logger = logging.getLogger(__name__)

PARENT_NAME = "agentsite-exec"
_REMOVE_WAIT = 2.0
_counter = itertools.count()


@dataclass(frozen=True, slots=True)
class Cgroup:
    """One command's cgroup: a directory per hierarchy that holds a controller we use."""

    dirs: tuple[Path, ...]

    @property
    def procs_files(self) -> list[Path]:
        return [path / "cgroup.procs" for path in self.dirs]

    def remove(self) -> None:
        """Remove the cgroup once its command is over, killing what still runs in it: its
        processes die with the sandbox, but a sandbox whose bwrap was killed in the moment
        before its first process tied itself to bwrap's life would run on."""
        deadline = time.monotonic() + _REMOVE_WAIT
        for path in self.dirs:
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                        logger.warning("could not remove cgroup %s: %s", path, exc)
                        break
                    _kill_members(path)
                    time.sleep(0.005)


class CgroupParent:
    """The folders under which this process makes per-command cgroups.

    `limits` maps a controller's limit file (relative to a child cgroup) to the folder of
    the hierarchy that has it, e.g. `{"pids.max": Path(".../pids/agentsite-exec")}`.
    """

    def __init__(self, parents: dict[str, Path]) -> None:
        self.parents = parents

    @property
    def has_pids(self) -> bool:
        return "pids.max" in self.parents

    def create(self, *, max_processes: int, memory_bytes: int) -> Cgroup:
        name = f"{os.getpid()}-{next(_counter)}"
        values = {
            "pids.max": str(max_processes),
            "memory.max": str(memory_bytes),
            "memory.limit_in_bytes": str(memory_bytes),
        }
        made: list[Path] = []
        try:
            for folder in dict.fromkeys(self.parents.values()):
                child = folder / name
                child.mkdir()
                made.append(child)
            for limit_file, folder in self.parents.items():
                (folder / name / limit_file).write_text(values[limit_file])
        except OSError:
            Cgroup(tuple(made)).remove()
            raise
        return Cgroup(tuple(made))


def find_parent() -> CgroupParent | None:
    """Where this process can make cgroups with a process limit, if anywhere."""
    try:
        mounts = _cgroup_mounts()
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    parents: dict[str, Path] = {}
    for line in memberships:
        _, controllers, path = line.split(":", 2)
        if controllers:  # v1: one hierarchy per controller set
            for controller in controllers.split(","):
                mount = mounts.get(controller)
                limit_file = {"pids": "pids.max", "memory": "memory.limit_in_bytes"}.get(controller)
                if mount is not None and limit_file:
                    folder = _parent_folder(mount, path)
                    if folder is not None:
                        parents[limit_file] = folder
        elif "" in mounts:  # v2: one unified hierarchy
            parents.update(_v2_parents(mounts[""], path))
    if "pids.max" not in parents:
        return None
    _remove_stale(set(parents.values()))
    return CgroupParent(parents)


def _cgroup_mounts() -> dict[str, tuple[Path, str]]:
    """Controller name ("" for the v2 hierarchy) to (mount point, root in the hierarchy)."""
    mounts: dict[str, tuple[Path, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mount_point, fstype, options = fields[3], Path(fields[4]), tail[0], tail[2]
        if fstype == "cgroup2":
            mounts.setdefault("", (mount_point, root))
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in {"pids", "memory"}:
                    mounts.setdefault(option, (mount_point, root))
    return mounts


def _own_folder(mount: tuple[Path, str], path: str) -> Path:
    mount_point, root = mount
    relative = os.path.relpath(path, root) if path.startswith(root) else path
    return (mount_point / relative.lstrip("/")).resolve()


def _parent_folder(mount: tuple[Path, str], path: str) -> Path | None:
    folder = _own_folder(mount, path) / PARENT_NAME
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def _v2_parents(mount: tuple[Path, str], path: str) -> dict[str, Path]:
    own = _own_folder(mount, path)
    try:
        available = (own / "cgroup.controllers").read_text().split()
    except OSError:
        return {}
    wanted = [name for name in ("pids", "memory") if name in available]
    folder = _parent_folder(mount, path) if "pids" in wanted else None
    if folder is None:
        return {}
    try:
        # Fails (EBUSY) unless this cgroup may have children with controllers: a v2 cgroup
        # that holds processes cannot hand controllers down.
        for target in (own, folder):
            for name in wanted:
                (target / "cgroup.subtree_control").write_text(f"+{name}")
    except OSError:
        return {}
    found = {"pids": "pids.max", "memory": "memory.max"}
    return {found[name]: folder for name in wanted}


def _remove_stale(folders: set[Path]) -> None:
    """Remove the cgroups left by server processes that died before removing their own,
    killing what still runs in them: a command whose server was killed in the moment
    before its sandbox could tie itself to the server's life."""
    for folder in folders:
        with contextlib.suppress(OSError):
            for child in folder.iterdir():
                owner = child.name.partition("-")[0]
                if child.is_dir() and owner.isdigit() and not alive(int(owner)):
                    _kill_members(child)
                    Cgroup((child,)).remove()


def _kill_members(cgroup: Path) -> None:
    with contextlib.suppress(OSError):
        for pid in (cgroup / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
