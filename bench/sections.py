"""BENCHMARKS.md's sections: a measurement run on its own (`python -m bench.sandbox`, `bench.trial_diff`) rewrites
its own section and leaves the others as they are."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def replace_section(text: str, lines: list[str]) -> str:
    """`text` with the section headed by `lines[0]` (a `## …` line) replaced by `lines` (appended when it has none)."""
    block = "\n".join(lines)
    pattern = re.compile(rf"^{re.escape(lines[0])}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        return pattern.sub(lambda _: block + "\n", text)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def write_section(lines: list[str]) -> None:
    """Rewrite that section of BENCHMARKS.md."""
    text = BENCHMARKS.read_text() if BENCHMARKS.exists() else ""
    BENCHMARKS.write_text(replace_section(text, lines).rstrip("\n") + "\n")
