"""Opening a path inside a folder by descriptors, one component at a time, never through a link.

A path checked by name and then opened by name again may have changed in between: whoever
can write in the folder (an agent, with `exec`) can put a link where a file or a folder
was, and the second open would follow it out of the folder. Here the folder is opened
first, then each component of the path, already resolved and so free of links, in the
folder opened before it, with O_NOFOLLOW: what is opened is inside the folder, or nothing
is. A link met on the way is one the resolved path did not have, and raises LinkFound.

A file to read or write is opened by `open_plain_file`: only a plain (regular) file, never a
named pipe, a socket or a device, whose open or read may wait forever for a partner or do
something of its own. Their type is asked of the name before it is opened and of the open
descriptor after; the open itself never waits (O_NONBLOCK), so one swapped in between is
refused too, at once.

Nothing here imports the rest of the project, so the file tools, uploads and the readers
of a user's prompt files share it. Linux only, as the sandbox is.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkFound(OSError):
    """A link where the resolved path had a plain file or folder: it was changed since."""


class NotAFile(OSError):
    """A named pipe, a socket or a device where a plain file was to be opened: `kind` says
    which, in words ("a named pipe")."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a regular file", name)
        self.kind = kind


def open_dir(name: str | Path, parent_fd: int | None = None) -> int:
    """The folder `name` (in the open folder `parent_fd`), not through a link at its name;
    NotADirectoryError when it is something else."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        # With O_DIRECTORY, Linux answers ENOTDIR rather than ELOOP for a link at the name.
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(name, parent_fd)):
            raise LinkFound(errno.ELOOP, "a link is in the way", str(name)) from exc
        raise


def _is_link(name: str | Path, parent_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_in(parent_fd: int, name: str, flags: int, mode: int = 0o666) -> int:
    """The entry `name` of the open folder `parent_fd`, opened with `flags`, never through
    a link at its name (with O_CREAT, nor by making a file where a link points)."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkFound(errno.ELOOP, "a link is in the way", name) from exc
        raise
    if flags & os.O_CREAT:
        try:
            adopt(fd, parent_fd)
        except OSError:
            os.close(fd)
            raise
    return fd


def adopt(fd: int, parent_fd: int) -> None:
    """When this process runs as root, what it made (open as `fd`) in a folder that is
    another account's (open as `parent_fd`) becomes that account's too: a user's folder is
    the account's that runs their commands, and those must be able to change what the file
    tools wrote there. A file with other names (hard links) keeps its owner, since they
    may be outside the folder."""
    if os.geteuid() != 0:
        return
    made, parent = os.fstat(fd), os.fstat(parent_fd)
    if made.st_uid != 0 or parent.st_uid == 0:
        return
    if stat.S_ISDIR(made.st_mode) or made.st_nlink == 1:
        os.fchown(fd, parent.st_uid, parent.st_gid)


def open_folder(folder: Path, target: Path, *, make: bool = False) -> int:
    """An open descriptor of the folder `target`: `folder` itself or below it, both
    resolved; `make` creates the folders that are missing on the way (as `mkdir -p`)."""
    fd = open_dir(folder)
    try:
        for part in _parts(folder, target):
            try:
                child = open_dir(part, fd)
            except FileNotFoundError:
                if not make:
                    raise
                with suppress(FileExistsError):  # made meanwhile, or a link: opened next
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = open_dir(part, fd)
                adopt(child, fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def opened_parent(folder: Path, target: Path, *, make: bool = False) -> Iterator[tuple[int, str]]:
    """The open folder that holds `target` (below `folder`, both resolved), and the name of
    `target` in it."""
    parts = _parts(folder, target)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the folder itself is no file", str(target))
    fd = open_folder(folder, target.parent, make=make)
    try:
        yield fd, parts[-1]
    finally:
        os.close(fd)


def open_file(
    folder: Path, target: Path, flags: int, mode: int = 0o666, *, make: bool = False
) -> int:
    """`target` (below `folder`, both resolved) opened with `flags`, walking from `folder`
    without following a link anywhere; `make` creates the missing folders on the way."""
    with opened_parent(folder, target, make=make) as (parent, name):
        return open_in(parent, name, flags, mode)


def _parts(folder: Path, target: Path) -> tuple[str, ...]:
    if not target.is_relative_to(folder):
        raise ValueError(f"{target} is not inside {folder}")
    return target.relative_to(folder).parts


def open_plain_file(
    folder: Path, target: Path, flags: int, mode: int = 0o666, *, make: bool = False
) -> int:
    """`open_file` for a plain file only: NotAFile for a named pipe, a socket or a device,
    IsADirectoryError for a folder; the open never waits for a pipe's other end."""
    with opened_parent(folder, target, make=make) as (parent, name):
        return open_plain_in(parent, name, flags, mode)


def open_plain_in(parent_fd: int, name: str, flags: int, mode: int = 0o666) -> int:
    """`open_in` for a plain file only, as `open_plain_file`."""
    _refuse_odd(_mode_at(parent_fd, name), name)
    try:
        fd = open_in(parent_fd, name, flags | os.O_NONBLOCK, mode)
    except OSError as exc:
        # A pipe without a reader (opened for writing), or a socket: one swapped in since.
        if exc.errno == errno.ENXIO:
            _refuse_odd(_mode_at(parent_fd, name), name)
        raise
    try:
        _refuse_odd(os.fstat(fd).st_mode, name)
        os.set_blocking(fd, True)  # a plain file: used as any other from here
    except BaseException:
        os.close(fd)
        raise
    return fd


def _mode_at(parent_fd: int, name: str) -> int | None:
    try:
        return os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


REGULAR = "a file"
_KINDS = (
    (stat.S_ISREG, REGULAR),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a link"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def kind_of(mode: int) -> str:
    """What an entry of `mode` is, in words: "a file", "a named pipe", …"""
    return next((kind for test, kind in _KINDS if test(mode)), "an entry of an unknown kind")


def kind_at(path: Path) -> str:
    """`kind_of` the entry at `path` itself (a link is "a link"), for an error's words;
    "nothing" when there is nothing."""
    try:
        return kind_of(os.lstat(path).st_mode)
    except OSError:
        return "nothing"


def _refuse_odd(mode: int | None, name: str) -> None:
    """Raise for what no file tool may open; a link is left to the open (LinkFound)."""
    if mode is None or stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "it is a folder", name)
    raise NotAFile(kind_of(mode), name)
