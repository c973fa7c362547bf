"""What the worker's registries share (environments, agents): a kind's module registers itself where it is written
(`@environment_of`, `@agent_of`), so its package imports each of its modules."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable


def import_modules(package: str, path: Iterable[str], programs: frozenset[str]) -> None:
    """Import every module of the package (`__name__`, `__path__`) but its programs, which run as processes of
    their own and are never imported by the worker."""
    for module in pkgutil.iter_modules(path):
        if module.name not in programs:
            importlib.import_module(f"{package}.{module.name}")
