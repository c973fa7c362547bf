"""SQL conditions joined by AND with the parameters they bind: what the trial filters and the search build."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Conditions:
    """SQL conditions joined by AND, with the parameters they bind."""

    clauses: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)

    def also(self, clause: str, **params: Any) -> Conditions:
        """These conditions and `clause` (binding `params`)."""
        return Conditions((*self.clauses, clause), {**self.params, **params})

    def with_(self, other: Conditions) -> Conditions:
        """These conditions and `other`'s."""
        return Conditions((*self.clauses, *other.clauses), {**self.params, **other.params})

    @property
    def sql(self) -> str:
        """The conditions as one SQL boolean expression (TRUE when there are none)."""
        return " AND ".join(self.clauses) or "TRUE"
