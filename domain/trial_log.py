"""The trial log as the worker writes it: its own lines, one line each, and what programs printed, each line labelled.

A line a program printed (the agent's or the MCP server's stderr, the verifier's log) is written as
`agent | <line>` (`server | …`, `verifier | …`), as docker compose labels the output of its services. A line of
the worker's own never starts so: the worker's lines start with its own words, and program text inside one (an
agent's closing summary, the error it gave) has its line breaks written as JSON writes them (`\\n`), so it stays
on that line. A program therefore cannot print a line that reads as the worker's ("agent finished: …", "step
budget of 12 used up"); the trial page shows each labelled line as that program's. Every text is masked before
it is split, escaped or cut, and a cut log keeps its end from the start of a line, so the cut cannot make the
rest of a program's line read as a line of the worker's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

OUTPUT_SOURCES = ("agent", "server", "verifier")  # whose output a labelled line is
OUTPUT_LINE = re.compile(r"(agent|server|verifier) \| ")  # how a labelled line starts
FRAGMENT = "…"  # starts the first line of a log cut inside a line (no line break in its end): a piece of a line
# Every character str.splitlines() breaks a line at: a superset of those a browser breaks at (HTML reads \r as \n).
LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class ProgramOutput:
    """What a program printed, for the log: `source` says whose (agent, server or verifier)."""

    source: str
    text: str


LogEntry = str | ProgramOutput  # a line of the worker's, or what a program printed


def one_line(text: str) -> str:
    """`text` on one line: each line break in it written as JSON escapes it (`\\n`, `\\r`, `\\u2028`)."""
    return LINE_BREAK.sub(lambda brk: json.dumps(brk.group())[1:-1], text)


def log_text(entries: Iterable[LogEntry], mask: Callable[[str], str] = str) -> str:
    """The log's text: each line of the worker's on one line, each line a program printed labelled with whose it
    is; every text masked (`mask`: the trial's Masker.text) before it is split or escaped."""
    lines: list[str] = []
    for entry in entries:
        if isinstance(entry, ProgramOutput):
            lines += [f"{entry.source} | {line}" for line in mask(entry.text).splitlines()]
        else:
            lines.append(one_line(mask(entry)))
    return "\n".join(lines)


def keep_end(log: str, cap: int) -> str:
    """The end of `log` within `cap` characters from the start of a line, after the marker truncate_keep_end writes
    (`… [log truncated: N earlier characters]`). When its end holds no line break, the piece of its last line is
    kept, marked as a piece (FRAGMENT) after that line's label when a program printed it."""
    if len(log) <= cap:
        return log
    start, piece = len(log) - cap, ""
    if log[start - 1] != "\n":
        newline = log.find("\n", start)
        if newline != -1:
            start = newline + 1
        else:
            label = OUTPUT_LINE.match(log, log.rfind("\n", 0, start) + 1)
            start = max(start, label.end()) if label else start
            piece = (label.group() if label else "") + FRAGMENT
    return f"… [log truncated: {start} earlier characters]\n{piece}{log[start:]}"


def piece_label(log: str, start: int) -> str:
    """What a piece of `log` starting at `start` (a search's snippet) is shown after, so that it never reads as a
    line of its own: nothing when it starts a line; else the label of the line it was cut from, when a program
    printed that line, and FRAGMENT (`agent | …`), as keep_end marks a piece."""
    if start <= 0 or log[start - 1] == "\n":
        return ""
    label = OUTPUT_LINE.match(log, log.rfind("\n", 0, start) + 1)
    return (label.group() if label else "") + FRAGMENT


def log_lines(log: str) -> list[tuple[str | None, str]]:
    """The lines of a stored log, each with the program whose output it is (None for any other line)."""
    return [((match.group(1) if (match := OUTPUT_LINE.match(line)) else None), line) for line in log.split("\n")]
