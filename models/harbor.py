"""Harbor (Terminal-Bench) job directories as ingest trials: one trial directory per attempt.

Mapping (also in the README): each task is an environment whose version spec is
{"kind": "external", "source": "harbor", "task": name[, "checksum"]}; the attempts of a
task form one run (in trial-name order, eight per run); `verifier_result.rewards.reward`
(or verifier/reward.json, verifier/reward.txt) is the reward and every other reward key
becomes a stage_* key; the exception type becomes the failure_category in snake_case
(`verifier_failed` when the reward is below 1 without one); agent/trajectory.json is the
ATIF trajectory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from models.environments import MAX_ATTEMPTS
from models.ingest import IngestError, ParsedTrial, parse_trial


def snake_case(name: str) -> str:
    """AgentTimeoutError → agent_timeout_error."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("__", "_")[:64]


def _reward_file(trial_dir: Path) -> float | None:
    reward_json, reward_txt = trial_dir / "verifier" / "reward.json", trial_dir / "verifier" / "reward.txt"
    if reward_json.exists():
        value = json.loads(reward_json.read_text())
        return float(value["reward"] if isinstance(value, dict) else value)
    if reward_txt.exists():
        return float(reward_txt.read_text().strip())
    return None


def harbor_line(trial_dir: Path, job_name: str) -> dict[str, Any]:
    """One trial directory as an ingest line (before grouping into runs)."""
    result = json.loads((trial_dir / "result.json").read_text())
    rewards = dict(((result.get("verifier_result") or {}).get("rewards")) or {})
    reward = rewards.pop("reward", None)
    if reward is None:
        reward = _reward_file(trial_dir)
    numeric = {k: float(v) for k, v in rewards.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    stages = {(k if k.startswith("stage_") else f"stage_{k}"): min(1.0, max(0.0, v)) for k, v in numeric.items()}
    if reward is None and numeric:
        reward = sum(stages.values()) / len(stages)
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
        "trajectory": json.loads(trajectory_file.read_text()) if trajectory_file.exists() else None,
        "_trial_name": result.get("trial_name") or trial_dir.name,
    }


def read_harbor_job(path: Path) -> list[ParsedTrial]:
    """Every trial of a Harbor job directory, validated, attempts numbered per task (runs of at most eight)."""
    if not path.is_dir():
        raise IngestError(0, "path", f"{path} is not a directory")
    trial_dirs = sorted(p.parent for p in path.glob("*/result.json"))
    lines = []
    for trial_dir in trial_dirs:
        try:
            lines.append(harbor_line(trial_dir, path.name))
        except (ValueError, KeyError, TypeError) as error:
            raise IngestError(0, str(trial_dir.relative_to(path)), f"unreadable Harbor trial: {error}") from error
    if not lines:
        raise IngestError(0, "path", f"no Harbor trials (*/result.json) under {path}")
    by_task: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_task.setdefault(line["environment"]["name"], []).append(line)
    parsed = []
    for task, attempts in by_task.items():
        for index, line in enumerate(sorted(attempts, key=lambda item: item.pop("_trial_name"))):
            line["attempt"] = index % MAX_ATTEMPTS + 1
            line["run"] = f"{path.name}/{task}/{index // MAX_ATTEMPTS + 1}"
            parsed.append(parse_trial(line, len(parsed) + 1))
    return parsed
