"""How deep JSON may nest: one limit for every JSON that comes in, and walks over JSON values without recursion.

Every JSON document that enters (a command agent's line, an MCP server's JSON-RPC line, a verifier's output, an
API body, an import line, a Harbor file) nests at most MAX_JSON_DEPTH levels of objects and arrays; deeper is
refused with TooDeep, which names the path down to where it goes too deep. Python's json parser recurses (it
raises RecursionError somewhere under a thousand levels): `loads` turns that into the same refusal, and every
walk here keeps a stack of its own, so no nesting makes one recurse.

What the app records wraps a few levels around what came in (a step's tool call holds the arguments), so a stored
value nests a few levels more. A stored value nesting deeper than MAX_STORED_JSON_DEPTH (written before this
rule, or by hand) is read with its deeper parts replaced by OMITTED: pages and exports over it stay whole.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import orjson

MAX_JSON_DEPTH = 64
MAX_STORED_JSON_DEPTH = 2 * MAX_JSON_DEPTH  # room for what a record wraps around an input; orjson writes 255
OMITTED = f"[nested more than {MAX_STORED_JSON_DEPTH} levels deep: left out]"
PATH_SHOWN = 4  # the keys and indices of a path a refusal shows before "…"

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a JSON string (skipped) or a bracket

Path = tuple[str | int, ...]


class TooDeep(ValueError):
    """JSON nesting objects and arrays deeper than its limit; `path` leads (keys and indices) to where it does."""

    def __init__(self, path: Path = (), limit: int = MAX_JSON_DEPTH) -> None:
        self.path, self.limit = path, limit
        super().__init__(f"nested more than {limit} levels deep" + (f" (at {self.where})" if path else ""))

    @property
    def field(self) -> str:
        """The top-level key (or index) the nesting is under ("" when not known)."""
        return str(self.path[0]) if self.path else ""

    @property
    def where(self) -> str:
        """The path as dotted text, its first PATH_SHOWN parts and "…" for the rest."""
        shown = ".".join(str(part) for part in self.path[:PATH_SHOWN])
        return shown + (".…" if len(self.path) > PATH_SHOWN else "")


CONTAINERS = (dict, list, tuple)
_CONTAINER_TYPES = frozenset(CONTAINERS)


def _path_of(link: Any) -> Path:
    """A path kept as nested (key, parent) pairs, root first."""
    parts: list[str | int] = []
    while link is not None:
        key, link = link
        parts.append(key)
    return tuple(reversed(parts))


def _backwards(node: Any) -> Iterator[tuple[Any, Any]]:
    """The (key or index, child) pairs of an object or array, last first (so a stack pops them in order)."""
    if isinstance(node, dict):
        return reversed(node.items())
    return zip(range(len(node) - 1, -1, -1), reversed(node), strict=True)


def nests_deeper(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests objects and arrays deeper than `limit` (a scalar nests 0 levels, `[]` one, `[[]]`
    two): a walk a level at a time, the cheapest in Python (it runs on every stored value read)."""
    level, depth = [value] if type(value) in _CONTAINER_TYPES else [], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            below += [
                child for child in (node.values() if type(node) is dict else node) if type(child) in _CONTAINER_TYPES
            ]
        level = below
    return False


def deep_path(value: Any, limit: int = MAX_JSON_DEPTH) -> Path | None:
    """The path to the first object or array of `value` nested deeper than `limit`, or None when it nests no
    deeper than that."""
    if not nests_deeper(value, limit):
        return None
    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        node, depth, link = stack.pop()
        if depth > limit:
            return _path_of(link)
        for key, child in _backwards(node):
            if isinstance(child, CONTAINERS):
                stack.append((child, depth + 1, (key, link)))
    return None


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH, prefix: Path = ()) -> None:
    """Raise TooDeep (its path after `prefix`, the name `value` goes by) when `value` nests deeper than `limit`."""
    path = deep_path(value, limit)
    if path is not None:
        raise TooDeep(prefix + path, limit)


def json_object(value: Any, name: str, refused: Callable[[str], Exception]) -> dict[str, Any]:
    """`value`, a JSON object nesting at most MAX_JSON_DEPTH deep, or `refused(why)` raised: `<name> must be a JSON
    object` or `<name> is nested …` (the path of the too deep value, from `name`)."""
    if not isinstance(value, dict):
        raise refused(f"{name} must be a JSON object")
    try:
        check_depth(value, prefix=(name,))
    except TooDeep as error:
        raise refused(f"{name} is {error}") from None
    return value


def _same(item: Any) -> Any:
    return item


def rebuild(
    value: Any, scalar: Callable[[Any], Any] = _same, key: Callable[[Any], Any] = _same, limit: int | None = None
) -> Any:
    """A copy of `value` with every scalar passed through `scalar` and every object key through `key`, objects,
    lists and tuples kept as they were (two keys made equal keep the later value, as a dict display does); with
    `limit`, each object or array nested deeper is OMITTED."""
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, top, 0, 1)]  # (item, what holds it, under which key, depth)
    tuples: list[tuple[Any, Any, list[Any]]] = []
    while stack:
        item, holder, slot, depth = stack.pop()
        if not isinstance(item, CONTAINERS):
            holder[slot] = scalar(item)
        elif limit is not None and depth > limit:
            holder[slot] = OMITTED
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            children = []
            for name, child in item.items():
                renamed = key(name)
                copy[renamed] = None
                children.append((child, copy, renamed, depth + 1))
            holder[slot] = copy
            stack.extend(reversed(children))  # popped in order: of two keys made equal the later is written last
        else:
            holder[slot] = listed = [None] * len(item)
            stack.extend((child, listed, index, depth + 1) for index, child in enumerate(item))
            if isinstance(item, tuple):
                tuples.append((holder, slot, listed))
    for holder, slot, listed in reversed(tuples):  # innermost first, so a tuple holds finished tuples
        holder[slot] = tuple(listed)
    return top[0]


def _pruned_text(text: str, limit: int, marker: str) -> str:
    """`text` with each object or array opening deeper than `limit` replaced by the JSON string `marker`."""
    pieces, start, opened, cut_from = [], 0, 0, -1
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            opened += 1
            if opened == limit + 1:
                pieces.append(text[start : match.start()])
                cut_from = match.start()
        elif token in ("]", "}"):
            if opened == limit + 1:
                pieces.append(json.dumps(marker))
                start, cut_from = match.end(), -1
            opened = max(0, opened - 1)
    pieces.append(text[start:] if cut_from < 0 else json.dumps(marker))
    return "".join(pieces)


def _text(data: str | bytes | bytearray | memoryview) -> str:
    return data if isinstance(data, str) else bytes(data).decode()


def _marked(value: Any, marker: str) -> Path:
    """The path to a string equal to `marker` in `value` (() when there is none)."""
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        node, link = stack.pop()
        if node == marker:
            return _path_of(link)
        if isinstance(node, dict | list):
            stack.extend((child, (key, link)) for key, child in _backwards(node))
    return ()


def loads(data: str | bytes | bytearray, limit: int = MAX_JSON_DEPTH, **options: Any) -> Any:
    """`data` parsed as JSON (`json.loads` with `options`); TooDeep, naming the path, when it nests deeper than
    `limit`; ValueError (json.JSONDecodeError, UnicodeDecodeError) when it is not JSON."""
    try:
        value = json.loads(data, **options)
    except RecursionError:  # deeper than Python's parser goes: find the path on the text, pruned to the limit
        marker = f"\u0000too deep {secrets.token_hex(8)}"
        try:
            path = _marked(json.loads(_pruned_text(_text(data), limit, marker), **options), marker)
        except ValueError:
            path = ()
        raise TooDeep(path, limit) from None
    check_depth(value, limit)
    return value


def loads_stored(data: str | bytes | bytearray | memoryview) -> Any:
    """A JSON value as stored (PostgreSQL's json and jsonb): parsed, with each part nested deeper than
    MAX_STORED_JSON_DEPTH replaced by OMITTED, so what reads it never meets a nesting it cannot handle."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:  # past orjson's 1024 levels (or a number wider than 64 bits): Python's json
        text = _text(data)
        try:
            value = json.loads(text)
        except RecursionError:
            value = json.loads(_pruned_text(text, MAX_STORED_JSON_DEPTH, OMITTED))
    if not nests_deeper(value, MAX_STORED_JSON_DEPTH):
        return value
    return rebuild(value, limit=MAX_STORED_JSON_DEPTH)
