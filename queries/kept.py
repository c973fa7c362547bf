"""Values a process keeps under keys that name the state of the rows they were computed from: the same key, the
same value, computed once. A key holds the ids it was read for (which only their organization's session can read
back) and sums that every write to those rows changes, so a kept value is never shown for another state."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")
_every: weakref.WeakSet[Kept] = weakref.WeakSet()


class Kept(Generic[V]):
    """At most `size` values, the least recently asked for dropped first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        _every.add(self)

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The value kept under `key`, else `compute()` kept under it."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = compute()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.size:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        """Drop every value."""
        with self._lock:
            self._values.clear()


def forget_all() -> None:
    """Drop the values of every Kept of the process, so the next read of each state computes it (bench.datasets
    measures pages so, as a dataset run in progress reads them after each trial)."""
    for kept in list(_every):
        kept.clear()
