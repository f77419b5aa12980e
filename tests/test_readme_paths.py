"""A newcomer following README alone gets an answer: its scripted-model lines and its
Ollama lines (with the scripted server standing in for Ollama, as README says it can), run
as README writes them, in a process of their own. Only the port, the data folder and the
workspace are the test's own."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import clean_env, free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, flags=re.S)


def block_with(text: str) -> str:
    [found] = [block for block in blocks() if text in block]
    return found


def assignments(block: str) -> dict[str, str]:
    """The `NAME=value` lines of a block, with `export` or without, comments left out."""
    pairs: dict[str, str] = {}
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            words = words[1:]
        if words and all("=" in word for word in words):
            pairs.update(word.split("=", 1) for word in words)
    return pairs


def command(block: str, start: str) -> list[str]:
    """The line of `block` that starts with `start`, as its words, without a trailing `&`."""
    [line] = [line for line in block.splitlines() if line.startswith(start)]
    words = shlex.split(line, comments=True)
    return words[:-1] if words[-1] == "&" else words


@contextmanager
def model_server(words: list[str]) -> Iterator[int]:
    """README's server command on a port of the test's own; the port."""
    port = free_port()
    words = [str(port) if word == words[words.index("--port") + 1] else word for word in words]
    words[0] = sys.executable
    process = subprocess.Popen(words, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_agent(words: list[str], settings: dict[str, str], tmp_path: Path) -> str:
    env = clean_env()
    env.update(settings)
    env["AGENT_DATA_DIR"] = str(tmp_path / "data")
    env["AGENT_WORKSPACE"] = str(tmp_path / "workspace")
    words = [sys.executable, *words[1:]]
    done = subprocess.run(
        words, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_scripted_model_lines_answer(tmp_path: Path) -> None:
    block = block_with("tests.llm_server")
    script = re.search(r"<<'EOF'\n(.*?)\nEOF\n", block, flags=re.S)
    assert script is not None
    (tmp_path / "script.json").write_text(script.group(1), encoding="utf-8")
    server = command(block, ".venv/bin/python -m tests.llm_server")
    server = [str(tmp_path / "script.json") if w == "script.json" else w for w in server]

    with model_server(server) as port:
        settings = assignments(block)
        base = settings["AGENT_API_BASE"]
        settings["AGENT_API_BASE"] = re.sub(r":\d+/", f":{port}/", base)
        said = run_agent(command(block, ".venv/bin/python manage.py agent"), settings, tmp_path)

    assert "I wrote hello.txt." in said
    written = tmp_path / "workspace" / "users" / ".ownerless" / "hello.txt"
    assert written.read_text() == "Hello World\n"


def test_the_ollama_lines_answer_from_a_server_standing_in_for_ollama(tmp_path: Path) -> None:
    settings = assignments(block_with("AGENT_API_BASE=http://127.0.0.1:11434/v1"))
    model = settings["AGENT_MODEL"].removeprefix("openai/")
    # README: `--model llama3.1:latest --port 11434` makes the scripted server stand in.
    assert f"--model {model} --port 11434" in README
    stand_in = [".venv/bin/python", "-m", "tests.llm_server", "--model", model, "--port", "11434"]

    with model_server(stand_in) as port:
        settings["AGENT_API_BASE"] = settings["AGENT_API_BASE"].replace("11434", str(port))
        said = run_agent(
            [".venv/bin/python", "manage.py", "agent", "-m", "hello, Ollama"], settings, tmp_path
        )

    assert "echo: hello, Ollama" in said
