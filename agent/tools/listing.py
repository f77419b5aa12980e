"""What list_dir and glob show of a folder: its entries, walked by descriptors, each of the
kind the folder itself says it is, a link as a link.

Nothing here follows a link, not even to ask what is behind it: whether a link leads to a
folder, a file or nothing would tell the agent which paths exist where it may not look (a
link it made to another user's folder, listed as a folder, and one to a missing folder,
listed as a file, told them apart). So a link is listed as `name@`, whatever it points at,
and never walked into. Folders are `name/`, named pipes `name|` and sockets `name=`, as
`ls -F` writes them; anything else is its bare name.

A name that is not UTF-8 is shown with its odd bytes as escapes (`\\udcff`), so that the
text can be sent to the model and stored; control characters too (`\\n`), so that each
entry is one line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from agent import openat
from agent.tools.guards import is_noise_dir
from agent.tools.guards.fence import printable

FILE, FOLDER, LINK, PIPE, SOCKET, OTHER = "file", "folder", "link", "pipe", "socket", "other"
MARKS = {FOLDER: "/", LINK: "@", PIPE: "|", SOCKET: "="}
NOTATION = (
    "Folders end with '/', links with '@' (not followed: see where one leads with exec), "
    "named pipes with '|', sockets with '='."
)


@dataclass(frozen=True, slots=True)
class Entry:
    path: PurePosixPath  # relative to the folder listed
    kind: str

    @property
    def depth(self) -> int:
        return len(self.path.parts)

    def shown(self) -> str:
        text = printable(self.path.as_posix())
        if not text.isprintable():
            text = "".join(char if char.isprintable() else _escaped(char) for char in text)
        return text + MARKS.get(self.kind, "")


def _escaped(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


def kind_of(entry: os.DirEntry[str]) -> str:
    """The kind of `entry` as its folder has it; a link's target is never looked at."""
    try:
        if entry.is_symlink():
            return LINK
        if entry.is_dir(follow_symlinks=False):
            return FOLDER
        if entry.is_file(follow_symlinks=False):
            return FILE
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:  # gone meanwhile
        return OTHER
    if stat.S_ISFIFO(mode):
        return PIPE
    if stat.S_ISSOCK(mode):
        return SOCKET
    return OTHER


def walk(
    fd: int, *, keep: Callable[[Entry], bool], enter: Callable[[Entry], bool]
) -> Iterator[Entry]:
    """The entries below the open folder `fd` that `keep` keeps; a kept folder is walked
    into when `enter` says so. Each folder is opened from `fd` one part of its path at a
    time, never through a link (one swapped in meanwhile is left out): however deep the
    tree, the walk holds two descriptors at most and recurses not at all."""
    pending: list[PurePosixPath] = [PurePosixPath()]
    while pending:
        rel = pending.pop()
        try:
            folder = _open_below(fd, rel)
        except OSError:  # gone, made a link or unreadable since it was listed
            continue
        try:
            with os.scandir(folder) as entries:
                found = [Entry(rel / entry.name, kind_of(entry)) for entry in entries]
        finally:
            os.close(folder)
        for entry in found:
            if not keep(entry):
                continue
            yield entry
            if entry.kind == FOLDER and enter(entry):
                pending.append(entry.path)


def _open_below(fd: int, rel: PurePosixPath) -> int:
    current = os.dup(fd)
    try:
        for part in rel.parts:
            child = openat.open_dir(part, current)
            os.close(current)
            current = child
    except BaseException:
        os.close(current)
        raise
    return current


def listing(fd: int, *, recursive: bool) -> list[str]:
    """list_dir's lines for the open folder `fd`: its entries (all below it when
    `recursive`), noise folders left out, sorted."""
    entries = walk(
        fd,
        keep=lambda entry: not (entry.kind == FOLDER and is_noise_dir(entry.path.name)),
        enter=lambda entry: recursive,
    )
    return sorted(entry.shown() for entry in entries)


def glob_matches(fd: int, pattern: str) -> list[str]:
    """glob's lines for `pattern` below the open folder `fd`, sorted."""
    pattern = pattern.removeprefix("./").rstrip("/") or "*"
    # wcmatch takes ~8 ms to import: paid by the first glob, not by every process.
    from wcmatch import glob as wcglob

    # "*", "?" and [...] stop at "/"; a "**" segment spans any depth, none included;
    # dot-files match like other names; case always counts. Braces, extglobs and a
    # leading "!" are literal.
    flags = wcglob.GLOBSTAR | wcglob.DOTMATCH | wcglob.CASE | wcglob.FORCEUNIX
    matcher = wcglob.compile(pattern, flags=flags)
    segments = pattern.split("/")
    # Without ** a pattern can't match deeper than its own segment count.
    max_depth = None if "**" in pattern else len(segments)
    # A noise folder the pattern names explicitly (".git/*") is searched after all.
    wanted = set(segments)

    def keep(entry: Entry) -> bool:
        name = entry.path.name
        return entry.kind != FOLDER or name in wanted or not is_noise_dir(name)

    def enter(entry: Entry) -> bool:
        return max_depth is None or entry.depth < max_depth

    entries = walk(fd, keep=keep, enter=enter)
    return sorted(entry.shown() for entry in entries if matcher.match(entry.path.as_posix()))
