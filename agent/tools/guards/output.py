"""Output caps, and the folders never worth showing the model."""

from __future__ import annotations


def cut_note(cut: int, unit: str = "characters") -> str:
    """The marker put where text was removed from the middle of a long output."""
    return f"\n\n... [{cut} {unit} cut from the middle of the output] ...\n\n"


def cap_output(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` so that about ``limit`` characters remain.

    The middle is replaced by a note saying how many characters were cut, because the
    start (what ran) and the end (how it finished) are what the model needs most.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return text[:head] + cut_note(cut) + (text[-tail:] if tail else "")


NOISE_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".eggs",
    }
)  # fmt: skip


def is_noise_dir(name: str) -> bool:
    """Folders never worth showing the model: VCS data, caches, virtualenvs, deps."""
    return name in NOISE_DIRS or name.endswith(".egg-info")
