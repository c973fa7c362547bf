"""A dataset version's tasks: the three ways a request lists them, the rules a list keeps (1 to 10,000 tasks, each
once, world seeds only where the kind draws worlds), and the sha256 that makes the same tasks the same version.

A task is an environment version and, for kinds that draw worlds (built-in, MCP), a fixed world seed; a Harbor-task
version is one task by itself (no seed). Refusals name the field as the request wrote it (`tasks[3].worldSeed`,
`worldSeeds[0]`, `count`).

A task's text (`task_text`) is what a trial of it is asked: a built-in world's drawn from its seed here (the worker
draws the same, domain.worlds), a Harbor task's instruction.md, and for an MCP server words saying that the server
draws it when the task runs.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.rules import NAME, UUID_RULE, Refused, integer_from, text
from domain.worlds import builtin_task

MAX_DATASET_TASKS = 10_000
TASK_TEXT_CHARS = 300  # the start of its task's text a dataset run keeps per task (its page's table)
# What a dataset run retries: trials the environment or the agent's infrastructure ended (a crashed agent program,
# an unreachable model, a world that could not start or score), never a failure the verifier scored.
INFRASTRUCTURE_ERRORS = ("environment_error", "agent_error")
DATASET_NAME = NAME  # unique in the organization (the API answers 409, the page 422)
DATASET_DESCRIPTION = text(2000)
SEED_SPACE = 2**31  # world seeds are 0 .. 2**31 - 1, the range evaluation runs draw theirs from
WORLD_SEED = integer_from(0, SEED_SPACE - 1)
TASK_COUNT = integer_from(1, MAX_DATASET_TASKS)
TASKS_SAYS = f"must be a list of 1 to {MAX_DATASET_TASKS} tasks"
FORMS = (
    'the body must hold "tasks": [{"environmentVersionId", "worldSeed"?}, …], or "environmentVersionId" with '
    '"worldSeeds": [..] or "count": N (seeds 1..N), or "environmentVersionId" alone for a Harbor-task version'
)


class DatasetRefused(ValueError):
    """A task list refused: `field` names where (`tasks[2].worldSeed`), `says` what is wrong; `status` 404 when the
    field names an environment version the organization does not have."""

    def __init__(self, field: str, says: str, status: int = 400) -> None:
        super().__init__(f"{field} {says}")
        self.field, self.says, self.status = field, says, status


@dataclass(frozen=True)
class TaskInput:
    """One task as requested: the environment version, its world seed (None: none given), and the request's names
    of the two fields (for refusals)."""

    environment_version_id: uuid.UUID
    world_seed: int | None
    version_field: str
    seed_field: str

    @property
    def key(self) -> tuple[uuid.UUID, int | None]:
        """What makes two tasks the same task."""
        return self.environment_version_id, self.world_seed


def _apply(rule: Any, value: Any, field: str) -> Any:
    try:
        return rule.apply(value)
    except Refused as refused:
        raise DatasetRefused(field, refused.says) from None


def _list(value: Any, field: str, says: str) -> list[Any]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_DATASET_TASKS:
        shown = f"{len(value)} items" if isinstance(value, list) else repr(value)[:40]
        raise DatasetRefused(field, f"{says}, not {shown}")
    return value


def requested_tasks(body: Mapping[str, Any]) -> list[TaskInput]:
    """The tasks a POST of dataset versions lists, in order, each checked by itself (then `repeated_tasks`)."""
    if "tasks" in body:
        extra = sorted(set(body) & {"environmentVersionId", "worldSeeds", "count"})
        if extra:
            raise DatasetRefused(extra[0], f"cannot be given with tasks; {FORMS}")
        return [_task(item, f"tasks[{i}]") for i, item in enumerate(_list(body["tasks"], "tasks", TASKS_SAYS))]
    if "environmentVersionId" not in body:
        raise DatasetRefused("tasks", f"is required; {FORMS}")
    version_id = _apply(UUID_RULE, body["environmentVersionId"], "environmentVersionId")
    if "worldSeeds" in body and "count" in body:
        raise DatasetRefused("count", "cannot be given with worldSeeds")
    if "worldSeeds" in body:
        seeds = _list(body["worldSeeds"], "worldSeeds", f"must be a list of 1 to {MAX_DATASET_TASKS} world seeds")
        return [
            TaskInput(version_id, _apply(WORLD_SEED, s, f"worldSeeds[{i}]"), "environmentVersionId", f"worldSeeds[{i}]")
            for i, s in enumerate(seeds)
        ]
    if "count" in body:
        count = _apply(TASK_COUNT, body["count"], "count")
        return [TaskInput(version_id, seed, "environmentVersionId", "count") for seed in range(1, count + 1)]
    return [TaskInput(version_id, None, "environmentVersionId", "worldSeeds")]


def _task(item: Any, at: str) -> TaskInput:
    if not isinstance(item, dict):
        raise DatasetRefused(at, 'must be a JSON object {"environmentVersionId", "worldSeed"?}')
    unknown = sorted(set(item) - {"environmentVersionId", "worldSeed"})
    if unknown:
        raise DatasetRefused(f"{at}.{unknown[0]}", "is unknown; a task has environmentVersionId and worldSeed")
    if "environmentVersionId" not in item:
        raise DatasetRefused(f"{at}.environmentVersionId", "is required")
    version_id = _apply(UUID_RULE, item["environmentVersionId"], f"{at}.environmentVersionId")
    seed = item.get("worldSeed")
    seed = None if seed is None else _apply(WORLD_SEED, seed, f"{at}.worldSeed")
    return TaskInput(version_id, seed, f"{at}.environmentVersionId", f"{at}.worldSeed")


class DatasetRefusals(DatasetRefused):
    """Several refusals of one task list at once, in order (`refusals`): a page lists them all; as a DatasetRefused
    (the API's one message and status) it is the first of them."""

    def __init__(self, refusals: list[DatasetRefused]) -> None:
        super().__init__(refusals[0].field, refusals[0].says, refusals[0].status)
        self.refusals = refusals


def refuse_any(refusals: list[DatasetRefused]) -> None:
    """Raise the refusals, when there are any: the one, or DatasetRefusals of them all."""
    if len(refusals) == 1:
        raise refusals[0]
    if refusals:
        raise DatasetRefusals(refusals)


def repeated_tasks(tasks: list[TaskInput]) -> list[DatasetRefused]:
    """A refusal for each task the list already holds (the same environment version and world seed)."""
    first: dict[tuple[uuid.UUID, int | None], int] = {}
    refusals: list[DatasetRefused] = []
    for i, task in enumerate(tasks):
        if task.key in first:
            seed = "no world seed" if task.world_seed is None else f"world seed {task.world_seed}"
            refusals.append(
                DatasetRefused(
                    task.seed_field if task.world_seed is not None else task.version_field,
                    f"repeats task {first[task.key] + 1} (environment version {task.environment_version_id}, {seed}); "
                    "a dataset version holds each task once",
                )
            )
        else:
            first[task.key] = i
    return refusals


def misplaced_seeds(tasks: list[TaskInput], draws_worlds: Mapping[uuid.UUID, bool]) -> list[DatasetRefused]:
    """A refusal for each world seed on a version that draws no worlds (a Harbor task is one task by itself), and
    each task of a version that draws worlds without one. `draws_worlds` maps each environment version to whether it
    does (a version it lacks is refused elsewhere)."""
    refusals: list[DatasetRefused] = []
    for task in tasks:
        draws = draws_worlds.get(task.environment_version_id)
        if task.world_seed is not None and draws is False:
            refusals.append(
                DatasetRefused(
                    task.seed_field, "must be left out: a Harbor-task version is one task by itself, with no world seed"
                )
            )
        if task.world_seed is None and draws:
            refusals.append(
                DatasetRefused(
                    task.seed_field,
                    "is required: a built-in or MCP version draws a world from it "
                    "(give worldSeed, worldSeeds or count)",
                )
            )
    return refusals


def tasks_sha256(tasks: list[TaskInput]) -> str:
    """sha256 of the ordered tasks (environment version ids and world seeds): the same tasks, the same hash."""
    canonical = json.dumps([[str(t.environment_version_id), t.world_seed] for t in tasks], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def infrastructure_error(status: str, failure_category: str | None) -> bool:
    """Whether a trial ended in an infrastructure error (retried by "retry the tasks that ended in errors"): it
    was never scored (status error) or its category is one of INFRASTRUCTURE_ERRORS."""
    return status == "error" or failure_category in INFRASTRUCTURE_ERRORS


def mcp_task_words(world_seed: int | None) -> str:
    """An MCP task's text before it runs: the server draws it then, from the seed (no server is started to tell)."""
    return f"Drawn by the MCP server when the task runs, world seed {world_seed}."


NO_INSTRUCTION = "(the task's instruction.md is not stored here)"


def task_text(spec: Mapping[str, Any], world_seed: int | None, instruction: str | None = None) -> str:
    """The text a trial of this task is asked. `spec` is the environment version's normalised spec
    (domain.specs.validate_spec); `instruction` a Harbor task's instruction.md (domain.harbor_task.instruction_of)."""
    kind = spec.get("kind", "builtin")
    if kind == "builtin" and world_seed is not None:
        return builtin_task(dict(spec), world_seed).text
    if kind == "mcp":
        return mcp_task_words(world_seed)
    if kind == "harbor-task":
        return NO_INSTRUCTION if instruction is None else instruction
    return f"(a {kind} version runs no task here)"
