"""The workspace fence: user-given paths resolved (symlinks followed) and kept inside."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent import openat
from agent.tools.tool_errors import GuardError


def printable(text: str) -> str:
    """`text` with what no UTF-8 can hold (lone surrogates: the bytes of a file name that
    is not UTF-8, as Python decodes them) written as escapes, so that it can be shown, sent
    and stored."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class Workspace:
    """Resolves user-given paths against a workspace root and fences them in.

    Paths are resolved with symlinks followed (every component, the last one included),
    so a link inside the workspace that points outside is refused just like ``../x``.
    """

    def __init__(self, root: Path | str, *, restrict: bool = True) -> None:
        # Resolve the root too: a workspace under a symlinked /tmp must still contain its
        # own resolved children.
        self.root: Path = Path(root).expanduser().resolve()
        self.restrict: bool = restrict

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, restrict={self.restrict})"

    def contains(self, path: Path) -> bool:
        """Whether the already resolved ``path`` is the root or below it."""
        return path == self.root or path.is_relative_to(self.root)

    def resolve(self, path: str | Path) -> Path:
        """The real absolute path for ``path``; raises GuardError when it leaves the fence,
        or when it is no path at all (a NUL byte, a lone surrogate, a loop of links)."""
        raw = str(path)
        shown = printable(raw)
        if "\x00" in raw:
            raise GuardError(f"path {shown!r} contains a NUL byte")
        if shown != raw:
            raise GuardError(
                f"path '{shown}' holds a lone surrogate, which is no character; "
                "name files with plain text"
            )
        candidate = self._home(raw) if raw.startswith("~") else Path(raw)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except RuntimeError as exc:  # a loop of links
            raise GuardError(f"path '{raw}' goes round a loop of links") from exc
        except OSError as exc:  # unreadable components, names too long
            raise GuardError(f"cannot resolve path '{raw}': {exc.strerror}") from exc
        if self.restrict and not self.contains(resolved):
            raise self._outside(raw)
        return resolved

    def _home(self, raw: str) -> Path:
        """`~` and `~/x` as the server's home has them; `~name/x`, a home of another account
        of the server, outside the fence without asking whether that account exists (that
        would tell the agent which accounts the server has)."""
        account = raw[1:].split("/", 1)[0]
        if account and self.restrict:
            raise GuardError(
                f"path '{raw}' is outside the workspace ({self.root}): '~{account}' names the "
                "home folder of an account of the server; only paths inside the workspace are "
                f"allowed (a file of that name in the workspace is './{raw}')"
            )
        try:
            return Path(raw).expanduser()
        except RuntimeError as exc:  # no such account, or no home
            raise GuardError(
                f"path '{raw}' starts with the home folder of '~{account}', which this server "
                "does not have; give the path without '~'"
            ) from exc

    def _outside(self, raw: str) -> GuardError:
        return GuardError(
            f"path '{raw}' is outside the workspace ({self.root}); "
            "only paths inside the workspace are allowed"
        )

    def open(self, resolved: Path, flags: int, *, shown: str, make: bool = False) -> int:
        """The regular file at `resolved` (from `resolve`) opened with `flags`, by
        descriptors from the root and never through a link, so that it is the file that was
        checked even when the path changes meanwhile (the agent can swap a file for a link
        with `exec` while a tool runs); `make` creates the missing folders on the way.

        Anything but a regular file is refused (GuardError; IsADirectoryError for a folder)
        and never waited for: a named pipe's open or read would hold the call until a
        process opens its other end, which may be never."""
        with self._walking(shown):
            try:
                return openat.open_plain_file(self._base(resolved), resolved, flags, make=make)
            except openat.NotAFile as exc:
                raise GuardError(
                    f"'{shown}' is {exc.kind}, not a regular file; "
                    "file tools read and write regular files only"
                ) from exc

    def open_dir(self, resolved: Path, *, shown: str) -> int:
        """The folder at `resolved` (from `resolve`) opened as `open` opens a file."""
        with self._walking(shown):
            return openat.open_folder(self._base(resolved), resolved)

    def _base(self, resolved: Path) -> Path:
        # Unfenced, a path may be anywhere: it is walked from the file system's root.
        return self.root if self.contains(resolved) else Path(resolved.anchor)

    @contextmanager
    def _walking(self, shown: str) -> Iterator[None]:
        try:
            yield
        except openat.LinkFound as exc:
            raise GuardError(
                f"path '{shown}' was changed into a link while it was being opened; "
                "links met there are not followed, only paths inside the workspace are allowed"
            ) from exc

    def display(self, path: Path) -> str:
        """A short name for ``path``: relative to the root when inside, absolute otherwise."""
        if path == self.root:
            return "."
        if path.is_relative_to(self.root):
            return path.relative_to(self.root).as_posix()
        return str(path)
