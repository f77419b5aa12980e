"""How a `manage.py` process ends: without the interpreter's teardown, but with everything
a normal end gives a caller: what it wrote, whole; the exit status it meant; and the exit
handlers that others registered, run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import clean_env, run_manage


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**clean_env(), "AGENT_DATA_DIR": str(tmp_path / "data")}


def shell(env: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    return run_manage(env, "shell", "-v", "0", "-c", code)


def test_output_still_in_its_buffers_reaches_the_pipe(env: dict[str, str]) -> None:
    # No newline at the end: to a pipe, none of it is written before the process ends.
    done = shell(env, "import sys; sys.stdout.write('o' * 100_001); sys.stderr.write('e' * 7)")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "o" * 100_001
    assert done.stderr.endswith("e" * 7)


@pytest.mark.parametrize(
    ("code", "status", "said"),
    [
        ("import sys; sys.exit(3)", 3, ""),
        ("import sys; sys.exit('no such thing')", 1, "no such thing"),
        ("raise RuntimeError('a bug')", 1, "RuntimeError: a bug"),
        ("import sys; sys.exit()", 0, ""),
    ],
)
def test_the_exit_status_is_the_one_meant(
    env: dict[str, str], code: str, status: int, said: str
) -> None:
    done = shell(env, code)
    assert done.returncode == status, done.stderr
    assert said in done.stderr


def test_other_exit_handlers_run_first(env: dict[str, str], tmp_path: Path) -> None:
    record = tmp_path / "handled"
    code = (
        f"import atexit, pathlib; atexit.register(pathlib.Path({str(record)!r}).write_text, 'ran')"
    )
    done = shell(env, code)
    assert done.returncode == 0, done.stderr
    assert record.read_text() == "ran"


def test_a_file_the_command_left_open_is_flushed(env: dict[str, str], tmp_path: Path) -> None:
    # Held by a module, as a plugin's log might be, so that only the end frees it; as the
    # interpreter's teardown would have, what its buffer (8 KiB) holds reaches the file.
    text, raw = tmp_path / "kept.txt", tmp_path / "kept.bin"
    code = (
        "import sys\n"
        f"sys.modules['__main__'].text = open({str(text)!r}, 'w')\n"
        "sys.modules['__main__'].text.write('x' * 1000)\n"
        f"sys.modules['__main__'].raw = open({str(raw)!r}, 'wb')\n"
        "sys.modules['__main__'].raw.write(b'y' * 10)\n"
    )
    done = shell(env, code)
    assert done.returncode == 0, done.stderr
    assert text.read_text() == "x" * 1000
    assert raw.read_bytes() == b"y" * 10
