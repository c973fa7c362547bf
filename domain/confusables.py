"""Characters that look alike: the skeleton of Unicode's UTS #39 (Unicode Security Mechanisms, section 4), which two
strings share when a reader could take one for the other ("fIaky" and "flaky": I is drawn like l).

The data is Unicode's confusables.txt, version 17.0.0, reduced to its mappings (a character, then the prototype it
looks like) in `confusables.txt` beside this module; its header keeps the original's date, copyright and SHA-256.
The default-ignorable code points the skeleton drops are those of DerivedCoreProperties.txt of the same version.
Python's `unicodedata` gives the NFD (its own Unicode version: a character it does not know yet decomposes to itself).
"""

from __future__ import annotations

import unicodedata
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("confusables.txt")

# Default_Ignorable_Code_Point of DerivedCoreProperties-17.0.0.txt, inclusive ranges.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def default_ignorable(char: str) -> bool:
    """Whether the character is a default-ignorable code point (drawn as nothing: joiners, variation selectors)."""
    point = ord(char)
    return any(low <= point <= high for low, high in DEFAULT_IGNORABLE)


@cache
def prototypes() -> dict[str, str]:
    """Each confusable character's prototype (read once from confusables.txt): "I" → "l", "m" → "rn"."""
    found: dict[str, str] = {}
    for line in DATA.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            source, prototype = line.split(";")
            found[chr(int(source, 16))] = "".join(chr(int(point, 16)) for point in prototype.split())
    return found


def skeleton(text: str) -> str:
    """UTS #39's skeleton of `text`: NFD, default-ignorable code points removed, each character replaced by its
    prototype, NFD again. Two strings are confusable when their skeletons are equal."""
    mapped = prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    kept = "".join(mapped.get(char, char) for char in decomposed if not default_ignorable(char))
    return unicodedata.normalize("NFD", kept)
