"""Mask secret values in what a trial recorded, as CI systems do: every exact occurrence becomes `***`.

Masking comes before cutting: run_trial() builds one Masker of the trial's
secrets and hands it to the agent and the environment, and every place that
keeps part of what a program printed masks the whole text first, then cuts it
(a line the agent printed that is not JSON, a failing verifier's stderr, an
MCP server's first malformed line, observations, the log). A stream kept from
its start (a program's stderr) is masked as a text whose end is a cut. Then
run_trial() masks every string of the outcome but its status once more: each
step (tool, command, observation, and any richer field, keys included), the
log, the task, the stage keys, the failure category. A value is found raw and
in the escaped forms the worker itself writes (JSON string escapes, with and
without ensure_ascii, and Python's repr). At a cut (a truncation marker, or
the end of a text) a leading piece of a secret left right before it is masked
too, and so is a trailing piece right after the marker of a text whose end was
kept (a log).

Values shorter than MIN_MASKED_LENGTH characters are not masked: "1", "on" or
"dev" would turn every such letter or number of every observation into `***`,
and a value that short protects nothing (it is guessed in a few tries). They
are still sealed at rest and never shown on any page.

Masking guards against a program that prints its secret by accident; a program
that has a secret can always print it transformed (reversed, base64). The
sandbox and showing names only are what keep secrets from other people.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from domain.json_depth import rebuild
from domain.trajectory import Step

if TYPE_CHECKING:
    from domain.outcome import TrialOutcome

MASK = "***"
MIN_MASKED_LENGTH = 4
UNMASKED_FIELDS = {"status"}  # the worker's own vocabulary (succeeded/failed/error), never a process's output
CUT_MARKER = re.compile(r"\n… \[[^\]\n]*truncated")
KEPT_END_MARKER = re.compile(r"… \[[^\]\n]*truncated: \d+ earlier characters\]\n")  # truncate_keep_end's cut


def secret_values(*configs: dict[str, Any]) -> list[str]:
    """The string env values of specs and agent configs that are long enough to be masked."""
    values = {
        value
        for config in configs
        for value in (config.get("env") or {}).values()
        if isinstance(value, str) and len(value) >= MIN_MASKED_LENGTH
    }
    return sorted(values, key=len, reverse=True)


def _forms(value: str) -> set[str]:
    """A secret as it may appear in recorded text: raw, JSON-escaped both ways, and as Python's repr shows it."""
    return {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1], repr(value)[1:-1]}


class Masker:
    """Replaces every occurrence of a set of secret values in text and nested JSON-like data."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = [v for v in values if len(v) >= MIN_MASKED_LENGTH]
        forms = sorted({form for value in self.values for form in _forms(value)}, key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, forms))) if forms else None
        self.prefixes = sorted(
            {form[:n] for value in self.values for form in _forms(value) for n in range(MIN_MASKED_LENGTH, len(form))},
            key=len,
            reverse=True,
        )
        self.suffixes = sorted(
            {form[-n:] for value in self.values for form in _forms(value) for n in range(MIN_MASKED_LENGTH, len(form))},
            key=len,
            reverse=True,
        )

    def text(self, text: str) -> str:
        """`text` with every secret, and any leading piece of one left at a cut, replaced by MASK."""
        if self.pattern is None or not text:
            return text
        masked = self.pattern.sub(MASK, text)
        cuts = [match.start() for match in CUT_MARKER.finditer(masked)] + [len(masked)]
        for cut in reversed(cuts):
            before = masked[:cut]
            piece = next((p for p in self.prefixes if before.endswith(p)), None)
            if piece:
                masked = before[: -len(piece)] + MASK + masked[cut:]
        for marker in reversed(
            list(KEPT_END_MARKER.finditer(masked))
        ):  # the end was kept: a secret's tail may start it
            after = masked[marker.end() :]
            piece = next((p for p in self.suffixes if after.startswith(p)), None)
            if piece:
                masked = masked[: marker.end()] + MASK + after[len(piece) :]
        return masked

    def data(self, value: Any) -> Any:
        """Mask every string inside `value` (dict keys included), keeping its shape; it walks with a stack of its
        own (domain.json_depth.rebuild), so no nesting makes it recurse."""
        return rebuild(value, self._scalar, self._scalar)

    def _scalar(self, value: Any) -> Any:
        return self.text(value) if isinstance(value, str) else value


def mask_outcome(outcome: TrialOutcome, values: Iterable[str]) -> TrialOutcome:
    """A copy of `outcome` with every secret value masked in every string it will record."""
    masker = Masker(values)
    if masker.pattern is None:
        return outcome
    masked = {
        f.name: masker.data(getattr(outcome, f.name))
        for f in dataclasses.fields(outcome)
        if f.name not in UNMASKED_FIELDS | {"steps"} and isinstance(getattr(outcome, f.name), str | dict | list | tuple)
    }
    steps = [Step.from_stored(masker.data(step.to_stored())) for step in outcome.steps]  # masked as stored
    return dataclasses.replace(outcome, **masked, steps=steps)
