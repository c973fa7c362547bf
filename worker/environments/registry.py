"""The environments' registry: spec model (domain.specs.VARIANTS) → how a trial's environment of it starts
(`ENVIRONMENTS`), filled by `@environment_of(SpecModel)` in each environment's own module, which the package imports
(worker/environments/__init__.py); and `TrialPlace`, what a start is given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from domain.errors import SpecError
from worker.environments.base import TrialEnvironment
from worker.masking import Masker
from worker.sandbox import TrialSandbox


@dataclass(frozen=True)
class TrialPlace:
    """Where an environment starts: the trial's sandbox (None in tests of worlds that start no program), the Masker
    of its secrets (what its programs print is masked before any of it is cut), and whether the agent is a Harbor
    task's oracle (which alone sees the task's solution)."""

    sandbox: TrialSandbox | None = None
    masker: Masker | None = None
    oracle: bool = False

    def needed_sandbox(self, why: str) -> TrialSandbox:
        """The trial's sandbox, or SpecError saying why this environment needs one."""
        if self.sandbox is None:
            raise SpecError(why)
        return self.sandbox


Start = Callable[[Any, TrialPlace], TrialEnvironment]
S = TypeVar("S", bound=Start)

# Spec model → the environment a trial of it runs in. ExternalSpec has none: its trials ran in another harness.
ENVIRONMENTS: dict[type[BaseModel], Start] = {}


def environment_of(model: type[BaseModel]) -> Callable[[S], S]:
    """Register the decorated start (spec checked by `model`, TrialPlace) → environment as how trials of `model`'s
    specs start."""

    def register(start: S) -> S:
        ENVIRONMENTS[model] = start
        return start

    return register
