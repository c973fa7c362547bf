"""Harbor (Terminal-Bench) job directories as ingest trials: one trial directory per attempt.

Mapping (also in the README): each task is an environment whose version spec is
{"kind": "external", "source": "harbor", "task": name[, "checksum"]}; the attempts of a
task form one run (in trial-name order, eight per run); `verifier_result.rewards.reward`
(or verifier/reward.json, verifier/reward.txt) is the reward and every other reward key
becomes a stage_* key; the exception type becomes the failure_category in snake_case
(`verifier_failed` when the reward is below 1 without one); agent/trajectory.json is the
ATIF trajectory.

Every file is read through `read_job_file`: a path that resolves outside the job directory
(a symlink, or a symlinked trial directory) or that is not a regular file is refused, and no
error message ever quotes a file's content, only its path relative to the job.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from domain.vocabulary import MAX_ATTEMPTS
from importers.ingest import IngestError, ParsedTrial, parse_trial

TRIAL_FILES = ("agent/trajectory.json", "verifier/reward.json", "verifier/reward.txt")


def snake_case(name: str) -> str:
    """AgentTimeoutError → agent_timeout_error."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("__", "_")[:64]


class HarborFiles:
    """The files of one Harbor job directory, read only when they resolve to a regular file inside it."""

    def __init__(self, job: Path) -> None:
        self.job = job
        self.root = job.resolve()

    def name(self, path: Path) -> str:
        """`path` relative to the job directory, as error messages show it."""
        return str(path.relative_to(self.job)) if path.is_relative_to(self.job) else str(path)

    def exists(self, path: Path) -> bool:
        """Whether `path` exists at all (a symlink counts, even a dangling one, so that it gets refused)."""
        return path.is_symlink() or path.exists()

    def inside(self, path: Path) -> Path:
        """The real path of `path`, refused (naming the file) when it resolves outside the job directory."""
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(self.root):
            raise IngestError(
                0, self.name(path), "leads outside the job directory (symlink); refused, nothing imported"
            )
        return real

    def read_text(self, path: Path) -> str:
        """The text of `path`, refused (naming the file, never quoting it) when it leads outside the job directory."""
        real = self.inside(path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as error:
            raise IngestError(0, self.name(path), f"cannot be read ({error.strerror})") from None
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise IngestError(0, self.name(path), "is not a regular file; refused, nothing imported")
            data = file.read()
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise IngestError(0, self.name(path), "is not UTF-8 text") from None

    def read_json(self, path: Path) -> Any:
        """The JSON document in `path`; a syntax error names the file and the position, not the text."""
        try:
            return json.loads(self.read_text(path))
        except json.JSONDecodeError as error:
            raise IngestError(
                0, self.name(path), f"is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
            ) from None


def _reward_file(files: HarborFiles, trial_dir: Path) -> float | None:
    """The reward kept in verifier/reward.json or verifier/reward.txt, if either exists."""
    reward_json, reward_txt = trial_dir / "verifier" / "reward.json", trial_dir / "verifier" / "reward.txt"
    if files.exists(reward_json):
        value = files.read_json(reward_json)
        value = value.get("reward") if isinstance(value, dict) else value
        return _number(files, reward_json, value)
    if files.exists(reward_txt):
        return _number(files, reward_txt, files.read_text(reward_txt).strip())
    return None


def _number(files: HarborFiles, path: Path, value: Any) -> float:
    """`value` as a reward, or an error naming `path` (the value itself is not repeated: it is file content)."""
    if isinstance(value, bool):
        raise IngestError(0, files.name(path), "does not hold a number as its reward")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise IngestError(0, files.name(path), "does not hold a number as its reward") from None


def harbor_line(trial_dir: Path, job_name: str, files: HarborFiles | None = None) -> dict[str, Any]:
    """One trial directory as an ingest line (before grouping into runs)."""
    files = files or HarborFiles(trial_dir.parent)
    result_file = trial_dir / "result.json"
    for used in ("result.json", *TRIAL_FILES):
        if files.exists(trial_dir / used):
            files.inside(trial_dir / used)  # refused even when the reward in result.json means it is never read
    result = files.read_json(result_file)
    if not isinstance(result, dict):
        raise IngestError(0, files.name(result_file), "is not a JSON object")
    rewards = dict(((result.get("verifier_result") or {}).get("rewards")) or {})
    reward = rewards.pop("reward", None)
    reward = _reward_file(files, trial_dir) if reward is None else _number(files, result_file, reward)
    numeric = {k: float(v) for k, v in rewards.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    stages = {(k if k.startswith("stage_") else f"stage_{k}"): min(1.0, max(0.0, v)) for k, v in numeric.items()}
    if reward is None and numeric:
        reward = sum(stages.values()) / len(stages)
    category: str | None
    exception = result.get("exception_info") or {}
    if exception.get("exception_type"):
        category = snake_case(exception["exception_type"])
    else:
        category = "verifier_failed" if reward is not None and reward < 1 else None
    agent = result.get("agent_info") or {}
    model = (agent.get("model_info") or {}).get("name")
    trajectory_file = trial_dir / "agent" / "trajectory.json"
    task = result.get("task_name") or trial_dir.name
    spec = {"kind": "external", "source": "harbor", "task": task}
    if result.get("task_checksum"):
        spec["checksum"] = result["task_checksum"]
    return {
        "externalId": f"harbor:{result.get('id') or f'{job_name}/{trial_dir.name}'}",
        "environment": {"name": task, "spec": spec},
        "attempt": 1,
        "reward": None if reward is None else min(1.0, max(0.0, float(reward))),
        "stages": stages,
        "failureCategory": category,
        "log": "\n".join(filter(None, [exception.get("exception_message"), exception.get("exception_traceback")])),
        "agent": f"{agent.get('name', 'harbor-agent')}{f' ({model})' if model else ''}"[:200],
        "trajectory": files.read_json(trajectory_file) if files.exists(trajectory_file) else None,
        "_trial_name": result.get("trial_name") or trial_dir.name,
    }


def read_harbor_job(path: Path) -> list[ParsedTrial]:
    """Every trial of a Harbor job directory, validated, attempts numbered per task (runs of at most eight)."""
    if not path.is_dir():
        raise IngestError(0, "path", f"{path} is not a directory")
    files = HarborFiles(path)
    trial_dirs = sorted(p.parent for p in path.glob("*/result.json"))
    lines = []
    for trial_dir in trial_dirs:
        try:
            line = harbor_line(trial_dir, path.name, files)
        except IngestError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            # The exception's text may quote the file; its type is enough to say what kind of damage it is.
            detail = f"unreadable Harbor trial ({type(error).__name__} while reading result.json)"
            raise IngestError(0, files.name(trial_dir), detail) from None
        line["_trial_dir"] = files.name(trial_dir)
        lines.append(line)
    if not lines:
        raise IngestError(0, "path", f"no Harbor trials (*/result.json) under {path}")
    by_task: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_task.setdefault(line["environment"]["name"], []).append(line)
    parsed: list[ParsedTrial] = []
    for task, attempts in by_task.items():
        for index, line in enumerate(sorted(attempts, key=lambda item: item.pop("_trial_name"))):
            line["attempt"] = index % MAX_ATTEMPTS + 1
            line["run"] = f"{path.name}/{task}/{index // MAX_ATTEMPTS + 1}"
            trial_dir = line.pop("_trial_dir")
            try:
                parsed.append(parse_trial(line, len(parsed) + 1))
            except IngestError as error:
                raise IngestError(0, f"{trial_dir} ({error.field})", error.detail) from None
    return parsed
