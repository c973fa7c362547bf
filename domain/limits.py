"""Resource limits of a sandboxed program: their names, defaults, the operator's ceilings, and how a config asks.

A spec or an agent config may carry `"limits": {"memoryMb": 512, …}` and
`"network": true`; both are checked here, once, for every place that takes
them. Ceilings come from AGENTFORGE_MAX_* environment variables.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from domain.rules import Refused, integer_from

MIB = 1024 * 1024
DEFAULT_MAX_RUNS_PER_ORG = 4  # runs one organization may have in progress at once (AGENTFORGE_MAX_RUNS_PER_ORG)
DEFAULT_MAX_TRIAL_TIMEOUT_S = 3600.0  # the most seconds any trial gets (AGENTFORGE_MAX_TRIAL_TIMEOUT_S)
# Searches, comparisons, exports and task uploads one user may have in flight at once
# (AGENTFORGE_MAX_EXPENSIVE_REQUESTS).
DEFAULT_MAX_EXPENSIVE_REQUESTS = 4


@dataclass(frozen=True)
class Limit:
    """One resource limit: its key in a config's `limits`, default, default ceiling, and how it is enforced."""

    key: str
    default: int
    ceiling: int
    words: str  # "{n} CPU seconds", used in error and log lines
    rlimit: str | None  # the `resource` rlimit the sandbox's launcher sets, None when the worker enforces it (output)
    scale: int = 1

    @property
    def ceiling_variable(self) -> str:
        """The operator's environment variable that lowers or raises the ceiling, e.g. AGENTFORGE_MAX_CPU_SECONDS."""
        snake = "".join(f"_{c}" if c.isupper() else c for c in self.key).upper()
        return f"AGENTFORGE_MAX_{snake}"


LIMITS = (
    Limit("cpuSeconds", 60, 600, "{n} CPU seconds", "RLIMIT_CPU"),
    # Without a control group, RLIMIT_DATA: the memory a process writes (heap and private writable mappings), not
    # the address space V8 and the JVM reserve and never touch, which RLIMIT_AS counted (they could not start).
    Limit("memoryMb", 1024, 8192, "{n} MB of memory", "RLIMIT_DATA", MIB),
    Limit("processes", 64, 1024, "{n} processes", "RLIMIT_NPROC"),
    Limit("fileSizeMb", 64, 1024, "{n} MB per file", "RLIMIT_FSIZE", MIB),
    Limit("openFiles", 256, 4096, "{n} open files", "RLIMIT_NOFILE"),
    Limit("outputMb", 16, 256, "{n} MB of output", None, MIB),
    # The files a sandbox keeps, workspace and logs together: the size of the disk the worker (as root) mounts for
    # it (worker/disk.py); without root only fileSizeMb holds each file.
    Limit("diskMb", 1024, 8192, "{n} MB of disk", None, MIB),
)
LIMIT_BY_KEY = {limit.key: limit for limit in LIMITS}


def ceilings(environ: dict[str, str] | os._Environ[str] | None = None) -> dict[str, int]:
    """The operator's ceiling for every limit (AGENTFORGE_MAX_* variables, else the built-in ceilings)."""
    environ = os.environ if environ is None else environ
    result = {}
    for limit in LIMITS:
        raw = environ.get(limit.ceiling_variable, "")
        result[limit.key] = int(raw) if raw.strip().isascii() and raw.strip().isdigit() else limit.ceiling
    return result


def max_trial_timeout_s(environ: dict[str, str] | os._Environ[str] | None = None) -> float:
    """The most seconds any trial may take, build, agent and verifier together (AGENTFORGE_MAX_TRIAL_TIMEOUT_S)."""
    raw = (os.environ if environ is None else environ).get("AGENTFORGE_MAX_TRIAL_TIMEOUT_S", "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_MAX_TRIAL_TIMEOUT_S
    return value if math.isfinite(value) and value > 0 else DEFAULT_MAX_TRIAL_TIMEOUT_S


class LimitRefused(ValueError):
    """A config's `limits` refused: the key ("" for the object itself) and what it must be."""

    def __init__(self, key: str, says: str) -> None:
        super().__init__(f"{key} {says}")
        self.key, self.says = key, says


def checked_limits(value: Any) -> dict[str, int]:
    """A config's `limits` with every value an int (JSON's 512.0 is 512), or raise LimitRefused: keys must be known,
    values integers from 1 to the operator's ceiling (read at each check; domain.rules.integer_from)."""
    if not isinstance(value, dict):
        raise LimitRefused("", "must be a JSON object")
    top = ceilings()
    checked = {}
    for key, number in value.items():
        if key not in LIMIT_BY_KEY:
            raise LimitRefused(key, f"is unknown; limits are {', '.join(LIMIT_BY_KEY)}")
        try:
            checked[key] = integer_from(1, top[key]).apply(number)
        except Refused as refused:
            raise LimitRefused(key, refused.says) from None
    return checked


def validate_limits(value: Any, where: str) -> dict[str, int]:
    """Return a config's `limits` object, or raise ValueError naming the bad key (unknown, not a positive int, over
    the operator's ceiling)."""
    try:
        return checked_limits(value)
    except LimitRefused as refused:
        raise ValueError(f"{where}.limits{'.' + refused.key if refused.key else ''} {refused.says}") from None


class SandboxLimits:
    """`Annotated[dict[str, int], SandboxLimits()]`: a config's `limits`, checked by checked_limits, documented from
    LIMITS (a refusal names the key: `agent.limits.memoryMb must be an integer from 1 to 8192, not 99999`)."""

    def validate(self, value: Any) -> Any:
        """Return `value` when it is fine, else raise the refusal naming the bad key."""
        try:
            return checked_limits(value)
        except LimitRefused as refused:
            raise PydanticCustomError("rule", "{says}", {"says": refused.says, "under": refused.key}) from None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.validate, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {
            "type": "object",
            "additionalProperties": False,
            "description": "Resource limits of the sandboxed program; the operator's AGENTFORGE_MAX_* ceilings apply.",
            "properties": {
                limit.key: {"type": "integer", "minimum": 1, "maximum": limit.ceiling, "default": limit.default}
                for limit in LIMITS
            },
        }


def resolve_limits(overrides: dict[str, int] | None) -> dict[str, int]:
    """The limits one program runs under: defaults, the config's overrides, each held to the operator's ceiling."""
    top = ceilings()
    return {limit.key: min((overrides or {}).get(limit.key, limit.default), top[limit.key]) for limit in LIMITS}


def describe(key: str, limits: dict[str, int]) -> str:
    """`limits[key]` in words: "the limit of 64 processes"."""
    return "the limit of " + LIMIT_BY_KEY[key].words.format(n=limits[key])
