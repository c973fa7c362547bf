"""Text as pages show it: control characters made visible, so hostile or binary output stays readable."""

from __future__ import annotations

import re

from markupsafe import Markup

# C0 controls except tab and newline, and DEL: shown as their Unicode "control pictures" (U+2400 + code).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
PICTURES = str.maketrans(
    {code: chr(0x2400 + code) for code in [*range(0x00, 0x09), *range(0x0B, 0x20)]} | {0x7F: "\u2421"}
)


def visible_control_characters(value: object) -> object:
    """Jinja `finalize`: every printed string shows control characters as ␀…␟/␡ instead of raw bytes (a page
    prints thousands of values, so this is one translate in C, not a regular expression per value)."""
    if type(value) is str:
        return value if value.isprintable() else value.translate(PICTURES)  # most values print as they are
    if isinstance(value, str) and not isinstance(value, Markup):
        return str(value).translate(PICTURES)
    return value


def duration(seconds: float | None) -> str:
    """Seconds as a page says them: "42 s", "3 min 05 s", "1 h 04 min" ("—" when unknown)."""
    if seconds is None:
        return "—"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
