"""Names' normal form and look-alike key (domain.rules) and UTS #39's skeleton over Unicode's confusables
(domain.confusables): what is one name, what looks like another, and the data file they read."""

from __future__ import annotations

import re

import pytest

from domain.confusables import DATA, prototypes, skeleton
from domain.rules import look_alike, normal_name
from domain.triage import LABEL_NAME
from tests.helpers import found


@pytest.mark.parametrize(
    ("written", "normal"),
    [
        ("flaky", "flaky"),
        ("FLAKY", "flaky"),
        ("fla\u200bky", "flaky"),  # zero-width space
        ("\u200eflaky\u2069", "flaky"),  # bidirectional marks
        ("fl\u00adaky", "flaky"),  # soft hyphen
        ("\ufb02aky", "flaky"),  # the fl ligature
        ("\uff26\uff4c\uff41\uff4b\uff59", "flaky"),  # fullwidth
        ("Stra\u00dfe", "strasse"),  # ß folds to ss
        ("fIaky", "fiaky"),  # folding alone keeps I and l apart
    ],
)
def test_the_normal_form_drops_case_width_and_invisible_characters(written, normal):
    assert normal_name(written) == normal
    assert normal_name(normal) == normal


@pytest.mark.parametrize(
    "written",
    ["flaky", "FLAKY", "fIaky", "f1aky", "f|aky", "fl\u0430ky", "fla\u200bky", "\U0001d41flaky"],  # last: a bold f
)
def test_look_alikes_of_flaky_share_its_key(written):
    assert look_alike(written) == look_alike("flaky") == "flaky"


@pytest.mark.parametrize("other", ["fiaky", "flaky-verifier", "slaky", "flak"])
def test_names_that_look_different_keep_their_own_key(other):
    assert look_alike(other) != look_alike("flaky")


def test_the_skeleton_follows_uts_39():
    assert skeleton("\u0440\u0430ypal") == skeleton("paypal")  # Cyrillic r and a
    assert skeleton("m") == "rn" and skeleton("modern") == skeleton("rnodern")
    assert skeleton("0") == "O" and skeleton("I") == "l" == skeleton("1")
    assert skeleton("x\u034fy") == "xy"  # the combining grapheme joiner is default-ignorable
    assert skeleton("\u00e9") == "e\u0301"  # NFD


def test_the_data_is_unicodes_confusables_17():
    text = DATA.read_text(encoding="utf-8")
    assert "# Version: 17.0.0" in text and "© 2025 Unicode®, Inc." in text
    total = int(found(r"^# mappings: (\d+)$", text, re.MULTILINE).group(1))
    assert len(prototypes()) == total == 6565
    assert prototypes()["I"] == "l" and prototypes()["\u0430"] == "a"


@pytest.mark.parametrize("name", ["\ufe50x", "\u200b", "x" * 62 + "\u3392"])  # a comma, nothing, 65 characters
def test_a_name_whose_normal_form_is_no_name_is_refused(name):
    assert LABEL_NAME.check(name) is False
