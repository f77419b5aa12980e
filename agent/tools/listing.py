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

from agent import openat
from agent.tools.guards import is_noise_dir
from agent.tools.guards.fence import printable

FILE, FOLDER, LINK, PIPE, SOCKET, OTHER = "file", "folder", "link", "pipe", "socket", "other"
MARKS = {FOLDER: "/", LINK: "@", PIPE: "|", SOCKET: "="}
# Descriptors a walk keeps open at most, however deep the tree: each one fewer for the
# process's sockets and files.
MAX_HELD = 32
NOTATION = (
    "Folders end with '/', links with '@' (not followed: see where one leads with exec), "
    "named pipes with '|', sockets with '='."
)


@dataclass(frozen=True, slots=True)
class Entry:
    parts: tuple[str, ...]  # the path relative to the folder listed
    kind: str

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def path(self) -> str:
        return "/".join(self.parts)

    def shown(self) -> str:
        text = printable(self.path)
        if not text.isprintable():
            text = "".join(char if char.isprintable() else _escaped(char) for char in text)
        return text + MARKS.get(self.kind, "")


def _escaped(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


def entry_kind(entry: os.DirEntry[str]) -> str:
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
    into when `enter` says so, depth first, each opened from its parent without following a
    link (one swapped in meanwhile is left out). However deep the tree, the walk recurses
    not at all and holds at most MAX_HELD descriptors."""
    pending: list[tuple[str, ...]] = [()]
    with _Chain(fd) as chain:
        while pending:
            rel = pending.pop()
            try:
                folder = chain.open(rel)
            except OSError:  # gone, made a link or unreadable since it was listed
                continue
            try:
                with os.scandir(folder) as entries:
                    found = [Entry((*rel, entry.name), entry_kind(entry)) for entry in entries]
            finally:
                os.close(folder)
            for entry in found:
                if keep(entry):
                    yield entry
                    if entry.kind == FOLDER and enter(entry):
                        pending.append(entry.parts)


class _Chain:
    """Open descriptors of the folders from the top of a walk down to the last one opened
    (MAX_HELD at most), so that the next folder, depth first, is opened from its parent
    rather than part by part from the top; past MAX_HELD levels it is, from the deepest."""

    def __init__(self, fd: int) -> None:
        self.held: list[tuple[tuple[str, ...], int]] = [((), os.dup(fd))]

    def __enter__(self) -> _Chain:
        return self

    def __exit__(self, *exc: object) -> None:
        for _, fd in self.held:
            os.close(fd)
        self.held.clear()

    def open(self, rel: tuple[str, ...]) -> int:
        """A new descriptor of the folder at the parts `rel`, for the caller to close."""
        while len(self.held) > 1 and rel[: len(self.held[-1][0])] != self.held[-1][0]:
            os.close(self.held.pop()[1])
        base, fd = self.held[-1]
        fd = os.dup(fd)
        try:
            for part in rel[len(base) :]:
                child = openat.open_dir(part, fd)
                os.close(fd)
                fd = child
                if len(self.held) < MAX_HELD:
                    self.held.append(((*self.held[-1][0], part), os.dup(fd)))
        except BaseException:
            os.close(fd)
            raise
        return fd


def listing(fd: int, *, recursive: bool) -> list[str]:
    """list_dir's lines for the open folder `fd`: its entries (all below it when
    `recursive`), noise folders left out, sorted."""
    entries = walk(
        fd,
        keep=lambda entry: not (entry.kind == FOLDER and is_noise_dir(entry.name)),
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
        name = entry.name
        return entry.kind != FOLDER or name in wanted or not is_noise_dir(name)

    def enter(entry: Entry) -> bool:
        return max_depth is None or len(entry.parts) < max_depth

    entries = walk(fd, keep=keep, enter=enter)
    return sorted(entry.shown() for entry in entries if matcher.match(entry.path))
