"""File tools: read_file, write_file, edit_file, append_file, list_dir, glob."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools import ToolRegistry, build_registry
from agent.tools import files as files_module


@pytest.fixture
def tools(ws: Path) -> ToolRegistry:
    return build_registry(workspace=ws, exec_timeout=1)


@pytest.fixture
def open_tools(ws: Path) -> ToolRegistry:
    return build_registry(workspace=ws, restrict_to_workspace=False, exec_timeout=1)


# --- read_file ------------------------------------------------------------------------


async def test_read_file_numbers_lines(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    assert await tools.execute("read_file", {"path": "a.txt"}) == (
        "     1\tone\n     2\ttwo\n     3\tthree"
    )


async def test_read_file_without_trailing_newline_and_crlf(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.txt").write_bytes(b"one\r\ntwo")
    assert await tools.execute("read_file", {"path": "a.txt"}) == "     1\tone\n     2\ttwo"


async def test_read_file_paging(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await tools.execute("read_file", {"path": "a.txt", "offset": 3, "limit": 2})
    lines = result.splitlines()
    assert lines[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "Showing lines 3-4 of 10" in result
    assert "offset=5" in result

    tail = await tools.execute("read_file", {"path": "a.txt", "offset": 9})
    assert tail == "     9\tline 9\n    10\tline 10"


async def test_read_file_default_limit(tools: ToolRegistry, ws: Path) -> None:
    (ws / "big.txt").write_text("x\n" * 2500)
    result = await tools.execute("read_file", {"path": "big.txt"})
    assert "  2000\tx" in result
    assert "  2001\tx" not in result
    assert "Showing lines 1-2000 of 2500" in result
    assert "offset=2001" in result


async def test_read_file_offset_past_end(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    result = await tools.execute("read_file", {"path": "a.txt", "offset": 5})
    assert result.startswith("Error")
    assert "2 lines" in result


async def test_read_file_caps_long_lines(tools: ToolRegistry, ws: Path) -> None:
    (ws / "wide.txt").write_text("a" * 5000 + "\nshort\n")
    result = await tools.execute("read_file", {"path": "wide.txt"})
    first, second = result.splitlines()
    assert first.startswith("     1\t" + "a" * 2000)
    assert "line truncated, 3000 more chars" in first
    assert second == "     2\tshort"


async def test_read_file_huge_single_line(tools: ToolRegistry, ws: Path) -> None:
    (ws / "min.js").write_text("b" * 300_000)
    result = await tools.execute("read_file", {"path": "min.js"})
    assert "line truncated, 298000 more chars" in result
    assert len(result) < 3000


async def test_read_file_caps_total_output(tools: ToolRegistry, ws: Path) -> None:
    (ws / "wide.txt").write_text(("c" * 1500 + "\n") * 200)
    result = await tools.execute("read_file", {"path": "wide.txt"})
    assert len(result) <= files_module.MAX_READ_CHARS + 300
    assert "output capped" in result
    last_shown = int(result.split("\n\n[")[0].splitlines()[-1].split("\t")[0])
    assert f"offset={last_shown + 1}" in result


async def test_read_file_errors(tools: ToolRegistry, ws: Path) -> None:
    (ws / "dir").mkdir()
    (ws / "empty.txt").write_text("")
    (ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    assert await tools.execute("read_file", {"path": "missing.txt"}) == (
        "Error: file not found: missing.txt"
    )
    assert (await tools.execute("read_file", {"path": "dir"})).startswith("Error")
    assert "empty" in await tools.execute("read_file", {"path": "empty.txt"})
    binary = await tools.execute("read_file", {"path": "img.png"})
    assert binary.startswith("Error")
    assert "binary" in binary


async def test_read_file_non_utf8_text_is_shown(tools: ToolRegistry, ws: Path) -> None:
    (ws / "latin.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    result = await tools.execute("read_file", {"path": "latin.txt"})
    assert result.startswith("     1\tcaf")


# --- write_file / append_file ------------------------------------------------------------


async def test_write_file_creates_parents(tools: ToolRegistry, ws: Path) -> None:
    result = await tools.execute("write_file", {"path": "a/b/c.txt", "content": "héllo"})
    assert result == "Wrote 6 bytes to a/b/c.txt"
    assert (ws / "a" / "b" / "c.txt").read_text(encoding="utf-8") == "héllo"
    await tools.execute("write_file", {"path": "a/b/c.txt", "content": "new"})
    assert (ws / "a" / "b" / "c.txt").read_text() == "new"


async def test_write_file_onto_a_directory(tools: ToolRegistry, ws: Path) -> None:
    (ws / "d").mkdir()
    assert (await tools.execute("write_file", {"path": "d", "content": "x"})).startswith("Error")


async def test_append_file(tools: ToolRegistry, ws: Path) -> None:
    result = await tools.execute("append_file", {"path": "logs/a.log", "content": "one\n"})
    assert result == "Appended 4 bytes to logs/a.log"
    await tools.execute("append_file", {"path": "logs/a.log", "content": "two\n"})
    assert (ws / "logs" / "a.log").read_text() == "one\ntwo\n"


# --- edit_file -----------------------------------------------------------------------


async def test_edit_file_replaces_once(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\ny = 2\n")
    result = await tools.execute(
        "edit_file", {"path": "a.py", "old_text": "y = 2", "new_text": "y = 3"}
    )
    assert result == "Replaced 1 occurrence in a.py"
    assert (ws / "a.py").read_text() == "x = 1\ny = 3\n"


async def test_edit_file_not_found(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\n")
    result = await tools.execute("edit_file", {"path": "a.py", "old_text": "zzz", "new_text": ""})
    assert result.startswith("Error: old_text not found in a.py")
    assert (ws / "a.py").read_text() == "x = 1\n"


async def test_edit_file_whitespace_hint(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.py").write_text("def f():\n    return  1\n")
    result = await tools.execute(
        "edit_file", {"path": "a.py", "old_text": "return 1", "new_text": "return 2"}
    )
    assert result.startswith("Error: old_text not found")
    assert "whitespace" in result
    assert "line 2" in result


async def test_edit_file_ambiguous(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.txt").write_text("foo bar foo baz foo")
    result = await tools.execute("edit_file", {"path": "a.txt", "old_text": "foo", "new_text": "q"})
    assert result.startswith("Error")
    assert "matched 3 times" in result
    assert "replace_all" in result
    assert (ws / "a.txt").read_text() == "foo bar foo baz foo"


async def test_edit_file_replace_all(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.txt").write_text("foo bar foo baz foo")
    result = await tools.execute(
        "edit_file", {"path": "a.txt", "old_text": "foo", "new_text": "q", "replace_all": True}
    )
    assert result == "Replaced 3 occurrences in a.txt"
    assert (ws / "a.txt").read_text() == "q bar q baz q"


async def test_edit_file_crlf(tools: ToolRegistry, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    result = await tools.execute(
        "edit_file", {"path": "w.txt", "old_text": "a\nb", "new_text": "x\ny"}
    )
    assert result == "Replaced 1 occurrence in w.txt"
    assert (ws / "w.txt").read_bytes() == b"x\r\ny\r\nc\r\n"


async def test_edit_file_errors(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a.txt").write_text("abc")
    missing = await tools.execute("edit_file", {"path": "no.txt", "old_text": "a", "new_text": "b"})
    assert missing == "Error: file not found: no.txt"
    empty = await tools.execute("edit_file", {"path": "a.txt", "old_text": "", "new_text": "b"})
    assert empty.startswith("Error: old_text must not be empty")
    (ws / "bin").write_bytes(b"\xff\xfe\x00")
    binary = await tools.execute("edit_file", {"path": "bin", "old_text": "a", "new_text": "b"})
    assert binary.startswith("Error")


# --- list_dir ------------------------------------------------------------------------


def _make_tree(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("")
    (ws / "src" / "main.py").write_text("")
    (ws / "README.md").write_text("")
    (ws / "b.txt").write_text("")
    for noise in (".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"):
        (ws / noise).mkdir()
        (ws / noise / "junk.py").write_text("")
        (ws / "src" / noise).mkdir()
        (ws / "src" / noise / "junk.py").write_text("")


async def test_list_dir(tools: ToolRegistry, ws: Path) -> None:
    _make_tree(ws)
    assert await tools.execute("list_dir", {}) == "README.md\nb.txt\nsrc/"
    assert await tools.execute("list_dir", {"path": "src"}) == "main.py\npkg/"


async def test_list_dir_recursive(tools: ToolRegistry, ws: Path) -> None:
    _make_tree(ws)
    result = await tools.execute("list_dir", {"path": ".", "recursive": True})
    assert result.splitlines() == [
        "README.md",
        "b.txt",
        "src/",
        "src/main.py",
        "src/pkg/",
        "src/pkg/mod.py",
    ]


async def test_list_dir_caps_entries(tools: ToolRegistry, ws: Path) -> None:
    for i in range(520):
        (ws / f"f{i:04d}.txt").write_text("")
    result = await tools.execute("list_dir", {})
    lines = result.splitlines()
    assert lines[0] == "f0000.txt"
    assert "f0499.txt" in lines
    assert "f0500.txt" not in lines
    assert "20 more entries not shown" in result


async def test_list_dir_errors(tools: ToolRegistry, ws: Path) -> None:
    (ws / "f.txt").write_text("")
    (ws / "empty").mkdir()
    assert await tools.execute("list_dir", {"path": "nope"}) == "Error: directory not found: nope"
    assert (await tools.execute("list_dir", {"path": "f.txt"})).startswith("Error")
    assert "empty" in await tools.execute("list_dir", {"path": "empty"})


async def test_list_dir_does_not_walk_into_outside_symlinks(
    tools: ToolRegistry, ws: Path, outside: Path
) -> None:
    (ws / "out").symlink_to(outside, target_is_directory=True)
    result = await tools.execute("list_dir", {"recursive": True})
    assert "secret" not in result


# --- glob ----------------------------------------------------------------------------


async def test_glob(tools: ToolRegistry, ws: Path) -> None:
    _make_tree(ws)
    assert await tools.execute("glob", {"pattern": "**/*.py"}) == "src/main.py\nsrc/pkg/mod.py"
    assert await tools.execute("glob", {"pattern": "*.md"}) == "README.md"
    assert await tools.execute("glob", {"pattern": "src/*.py"}) == "src/main.py"
    assert await tools.execute("glob", {"pattern": "*.py", "path": "src"}) == "main.py"
    assert await tools.execute("glob", {"pattern": "src/*"}) == "src/main.py\nsrc/pkg/"
    assert await tools.execute("glob", {"pattern": "[Rb]*"}) == "README.md\nb.txt"


async def test_glob_pattern_semantics(tools: ToolRegistry, ws: Path) -> None:
    (ws / "a" / "b" / "c").mkdir(parents=True)
    for name in ("top.py", "x.txt", "xy.txt", ".env", "a/.hidden.py", "a/b/c/deep.py", "a/b/n"):
        (ws / name).write_text("")

    async def glob(pattern: str) -> list[str]:
        result = await tools.execute("glob", {"pattern": pattern})
        return [] if result.startswith("No files match") else result.splitlines()

    # ** spans any depth, none included, and enters dot-named folders and files.
    assert await glob("**/*.py") == ["a/.hidden.py", "a/b/c/deep.py", "top.py"]
    assert await glob("a/**/*.py") == ["a/.hidden.py", "a/b/c/deep.py"]
    assert await glob("a/**") == ["a/.hidden.py", "a/b/", "a/b/c/", "a/b/c/deep.py", "a/b/n"]
    # * and ? never cross "/", and only ** as a whole segment spans folders.
    assert await glob("*") == [".env", "a/", "top.py", "x.txt", "xy.txt"]
    assert await glob("a/*") == ["a/.hidden.py", "a/b/"]
    assert await glob("?.txt") == ["x.txt"]
    assert await glob("a?b") == []
    assert await glob("a**n") == []
    # Classes, negated classes (which never match "/" either) and dot-files.
    assert await glob("[!a]*") == [".env", "top.py", "x.txt", "xy.txt"]
    assert await glob("[xy]?.txt") == ["xy.txt"]
    assert await glob("a[!x]b") == []
    assert await glob(".*") == [".env"]
    # Matching is case-sensitive; braces are plain characters.
    assert await glob("*.PY") == []
    assert await glob("{top,x}.py") == []


async def test_glob_backslash_escapes_a_wildcard(tools: ToolRegistry, ws: Path) -> None:
    for name in ("q?.txt", "qa.txt", "q\\a.txt"):
        (ws / name).write_text("")
    assert await tools.execute("glob", {"pattern": "q\\?.txt"}) == "q?.txt"
    assert await tools.execute("glob", {"pattern": "q?.txt"}) == "q?.txt\nqa.txt"


async def test_glob_can_search_a_noise_dir_when_asked(tools: ToolRegistry, ws: Path) -> None:
    _make_tree(ws)
    assert await tools.execute("glob", {"pattern": ".git/*"}) == ".git/junk.py"


async def test_glob_no_match_and_errors(tools: ToolRegistry, ws: Path) -> None:
    assert "No files match" in await tools.execute("glob", {"pattern": "*.nope"})
    assert (await tools.execute("glob", {"pattern": "/etc/*"})).startswith("Error")
    assert (await tools.execute("glob", {"pattern": "*", "path": "nope"})).startswith("Error")
    assert "No files match" in await tools.execute("glob", {"pattern": "../*"})


async def test_glob_caps_results(tools: ToolRegistry, ws: Path) -> None:
    (ws / "d").mkdir()
    for i in range(510):
        (ws / "d" / f"{i:04d}.txt").write_text("")
    result = await tools.execute("glob", {"pattern": "**/*.txt"})
    assert len(result.splitlines()) == 502  # 500 matches, a blank line, the note
    assert "10 more matches not shown" in result


async def test_glob_lists_links_as_links_and_never_follows_them(
    tools: ToolRegistry, open_tools: ToolRegistry, ws: Path, outside: Path
) -> None:
    (ws / "inside.txt").write_text("")
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "leakdir").symlink_to(outside, target_is_directory=True)
    assert await tools.execute("glob", {"pattern": "**/*"}) == "inside.txt\nleak.txt@\nleakdir@"
    assert await tools.execute("glob", {"pattern": "leakdir/*"}) == (
        "No files match 'leakdir/*' under '.'."
    )
    assert (await tools.execute("glob", {"pattern": "*", "path": "leakdir"})).startswith("Error")
    # Without the fence too, a link is a link, and not walked into.
    assert await open_tools.execute("glob", {"pattern": "**/*"}) == (
        "inside.txt\nleak.txt@\nleakdir@"
    )


# --- the fence, for every file tool --------------------------------------------------------

CALLS = [
    ("read_file", {}),
    ("write_file", {"content": "x"}),
    ("edit_file", {"old_text": "top", "new_text": "pwned"}),
    ("append_file", {"content": "x"}),
    ("list_dir", {}),
    ("glob", {"pattern": "*"}),
]


def _bad_paths(ws: Path, outside: Path, tool: str) -> list[str]:
    is_dir_tool = tool in {"list_dir", "glob"}
    (ws / "file-link").symlink_to(outside / "secret.txt")
    (ws / "dir-link").symlink_to(outside, target_is_directory=True)
    return [
        "../outside" if is_dir_tool else "../outside/secret.txt",
        str(outside) if is_dir_tool else str(outside / "secret.txt"),
        "dir-link" if is_dir_tool else "file-link",
        "dir-link" if is_dir_tool else "dir-link/secret.txt",
    ]


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir()}


@pytest.mark.parametrize(("tool", "extra"), CALLS)
async def test_fence_refuses_paths_outside(
    tools: ToolRegistry, ws: Path, outside: Path, tool: str, extra: dict[str, str]
) -> None:
    for path in _bad_paths(ws, outside, tool):
        result = await tools.execute(tool, {"path": path, **extra})
        assert result.startswith("Error"), (tool, path, result)
        assert "outside the workspace" in result, (tool, path, result)
    assert _snapshot(outside) == {"secret.txt": "top secret\n"}


@pytest.mark.parametrize(("tool", "extra"), CALLS)
async def test_fence_off_allows_paths_outside(
    open_tools: ToolRegistry, ws: Path, outside: Path, tool: str, extra: dict[str, str]
) -> None:
    for path in _bad_paths(ws, outside, tool):
        result = await open_tools.execute(tool, {"path": path, **extra})
        if tool == "edit_file" and "not found" in result:
            continue  # an earlier path already edited the secret
        assert not result.startswith("Error"), (tool, path, result)


async def test_edit_file_refuses_a_file_too_large_to_read_whole(
    tools: ToolRegistry, ws: Path
) -> None:
    """edit_file reads a file whole: one of gigabytes (`truncate -s 1G`, made in an instant)
    would take the server's memory, so past its cap it says what to use instead."""
    big = ws / "big.txt"
    with big.open("wb") as fh:
        fh.truncate(files_module.MAX_EDIT_BYTES + 1)
    args = {"path": "big.txt", "old_text": "a", "new_text": "b"}
    result = await tools.execute("edit_file", args)
    assert result.startswith("Error: 'big.txt' is 10.0 MB; edit_file changes files up to 10 MB")
    assert "use exec" in result
    assert big.stat().st_size == files_module.MAX_EDIT_BYTES + 1


@pytest.mark.parametrize("tool", ["write_file", "append_file", "read_file"])
async def test_a_path_that_ends_with_a_slash_names_no_file(
    tools: ToolRegistry, ws: Path, tool: str
) -> None:
    args = {"path": "notes/"} | ({"content": "x"} if tool != "read_file" else {})
    result = await tools.execute(tool, args)
    assert result == "Error: 'notes/' names a folder (it ends with '/'); give a file's path"
    assert not (ws / "notes").exists()
