"""Harbor (Terminal-Bench) job directories as ingest trials: one trial directory per attempt.

Mapping (also in docs/api.md, Harbor job directories): each task is an environment whose version spec is
{"kind": "external", "source": "harbor", "task": name[, "checksum"]}; the attempts of a
task form one run (in trial-name order, eight per run); the verifier's rewards
(`verifier_result.rewards`, else verifier/reward.json, else verifier/reward.txt) are read as a native run reads
them (domain.harbor_task.rewards_of: every key but "reward" a stage_* key; the reward is "reward", else the only
key, else the mean of the keys; how it was derived is kept beside the verifier's words); the exception type
becomes the failure_category in snake_case (`verifier_failed` when the reward is below 1 without one);
agent/trajectory.json is the ATIF trajectory, every step of it a structured step; trial.log and the verifier's output
(verifier/test-stdout.txt, test-stderr.txt) and the exception form the log, capped keeping the end; the
task shown is the task's instruction.md (found from the config's task path, relative to the folder Harbor
ran in or to --tasks DIR). A directory of jobs imports each job; a directory that is neither is refused.

Every file is read through `HarborFiles`: a path that resolves outside the job directory
(a symlink, or a symlinked trial directory) or that is not a regular file is refused, and no
error message ever quotes a file's content, only its path relative to the job (and, for a reward
that cannot be read, its key).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from domain.harbor_task import Rewards, read_rewards, rewards_of, unit
from domain.json_depth import TooDeep, loads
from domain.outcome import LOG_CAP_CHARS, REWARD_EXPLANATION, VERIFIER_EXPLANATION, truncate
from domain.vocabulary import MAX_ATTEMPTS
from importers.ingest import IngestError, ParsedTrial, parse_trial

LOG_FILES = ("trial.log", "verifier/test-stdout.txt", "verifier/test-stderr.txt")
TRIAL_FILES = ("agent/trajectory.json", "verifier/reward.json", "verifier/reward.txt", *LOG_FILES)
LOG_READ_BYTES = 4 * LOG_CAP_CHARS  # the end of a log file is read, never more than this of it
INSTRUCTION_READ_BYTES = 64 * 1024
TASK_CAP_CHARS = 16 * 1024
# terminus-2 puts the task's instruction into its first prompt between these two lines
TERMINUS_TASK = re.compile(r"\nTask Description:\n(.*?)\n\nCurrent terminal state:", re.DOTALL)
QUOTED = re.compile(r", not (?:'.*'|\".*\"|-?[0-9][0-9.e+-]*|True|False|None)$", re.DOTALL)  # a refusal's value


def snake_case(name: str) -> str:
    """AgentTimeoutError → agent_timeout_error."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("__", "_")[:64]


class HarborFiles:
    """The files of one Harbor job directory, read only when they resolve to a regular file inside it."""

    def __init__(self, job: Path, label: str = "") -> None:
        self.job = job
        self.root = job.resolve()
        self.label = label  # the job's name, when error messages must say which job (a directory of jobs)

    def name(self, path: Path) -> str:
        """`path` relative to the job directory, as error messages show it."""
        name = str(path.relative_to(self.job)) if path.is_relative_to(self.job) else str(path)
        return f"{self.label}/{name}" if self.label else name

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

    def read_bytes(self, path: Path, limit: int | None = None, *, end: bool = False) -> tuple[bytes, int]:
        """The bytes of `path` (at most `limit` of them, from its start or `end`) and how many were left unread.

        Refused (naming the file, never quoting it) when it leads outside the job directory or is not a regular file.
        """
        real = self.inside(path)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as error:
            raise IngestError(0, self.name(path), f"cannot be read ({error.strerror})") from None
        with os.fdopen(fd, "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise IngestError(0, self.name(path), "is not a regular file; refused, nothing imported")
            skipped = max(0, status.st_size - limit) if limit is not None else 0
            if end and skipped:
                file.seek(skipped)
            data = file.read() if limit is None else file.read(limit)
        return data, skipped

    def read_text(self, path: Path) -> str:
        """The text of `path`, refused (naming the file, never quoting it) when it leads outside the job directory."""
        data, _ = self.read_bytes(path)
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise IngestError(0, self.name(path), "is not UTF-8 text") from None

    def read_log(self, path: Path) -> str:
        """The end of a log file as text (bytes not UTF-8 replaced), saying how much of its start was skipped."""
        data, skipped = self.read_bytes(path, LOG_READ_BYTES, end=True)
        text = data.decode(errors="replace")
        return f"… [{skipped} earlier bytes not read]\n{text}" if skipped else text

    def read_json(self, path: Path) -> Any:
        """The JSON document in `path`; a syntax error names the file and the position, not the text, and so does
        nesting deeper than MAX_JSON_DEPTH (not the keys down to it: they are the file's content)."""
        try:
            return loads(self.read_text(path))
        except TooDeep as error:
            detail = f"is nested more than {error.limit} levels deep; refused, nothing imported"
            raise IngestError(0, self.name(path), detail) from None
        except json.JSONDecodeError as error:
            raise IngestError(
                0, self.name(path), f"is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
            ) from None


def _rewards(files: HarborFiles, trial_dir: Path, result: dict[str, Any]) -> Rewards | None:
    """What the verifier's rewards give the trial (domain.harbor_task.rewards_of, as a native run reads them):
    result.json's verifier_result.rewards, else verifier/reward.json, else verifier/reward.txt; None without any.
    A refusal names the file and the key, never a value (it is file content)."""
    result_file = trial_dir / "result.json"
    reward_json, reward_txt = trial_dir / "verifier" / "reward.json", trial_dir / "verifier" / "reward.txt"
    written = _object(result, "verifier_result").get("rewards")
    try:
        if written:
            return rewards_of(written, "result.json")
        if files.exists(reward_json):
            return rewards_of(files.read_json(reward_json), "reward.json")
        if files.exists(reward_txt):
            return read_rewards(None, files.read_bytes(reward_txt)[0])
    except IngestError:  # a file that cannot be read, already naming it
        raise
    except ValueError as problem:
        source = result_file if written else reward_json if files.exists(reward_json) else reward_txt
        raise IngestError(0, files.name(source), str(problem)) from None
    return None


def _object(document: dict[str, Any], key: str) -> dict[str, Any]:
    """`document[key]` when it is a JSON object, else an empty one."""
    value = document.get(key)
    return value if isinstance(value, dict) else {}


MISSING_INSTRUCTION = "its instruction.md was not found beside the job; import with --tasks DIR"


def _task_roots(job: Path, config: dict[str, Any], tasks: Path | None) -> list[Path]:
    """Where a task path of the job's config is looked up: --tasks DIR (the folder the paths are relative to, or
    the tasks folder itself: its parent is tried too), else the folder Harbor ran in.

    Harbor resolves a task path against the folder it ran in; the job directory is `<that folder>/<trials_dir>`
    (`jobs/<job name>`), or was moved or renamed: then it sits directly in that folder (the job directory's
    parent) or in a jobs folder of it (its grandparent).
    """
    if tasks is not None:  # the folder the task paths are relative to, or the tasks folder itself
        return [tasks, tasks.resolve().parent]
    roots = []
    trials_dir = Path(str(config.get("trials_dir") or ""))
    parts, here = trials_dir.parts, job.resolve().parts
    if parts and not trials_dir.is_absolute() and len(here) > len(parts) and here[-len(parts) :] == parts:
        roots.append(Path(*here[: -len(parts)]))
    # moved: the job directory directly in the folder Harbor ran in, or still in its own jobs folder there
    return [*roots, job.resolve().parent, job.resolve().parent.parent]


def _instruction(result: dict[str, Any], trajectory: Any, roots: list[Path]) -> str:
    """The task's instruction: its instruction.md, else as terminus-2 quoted it, else which task it was."""
    path = _object(_object(result, "config"), "task").get("path") or _object(result, "task_id").get("path")
    if isinstance(path, str) and path:
        for root in roots:
            candidate = root / path / "instruction.md"
            # The task directory is read only where it stays inside the folder it was looked up in.
            tasks = HarborFiles(root)
            if not tasks.exists(candidate):
                continue
            try:
                data, _ = tasks.read_bytes(candidate, INSTRUCTION_READ_BYTES)
            except IngestError:
                continue
            return truncate(data.decode(errors="replace").strip(), TASK_CAP_CHARS, "task")
    steps = trajectory.get("steps") if isinstance(trajectory, dict) else None
    for step in steps if isinstance(steps, list) else []:
        message = step.get("message") if isinstance(step, dict) else None
        if isinstance(message, str) and (quoted := TERMINUS_TASK.search(message)):
            return truncate(quoted.group(1).strip(), TASK_CAP_CHARS, "task")
    name = result.get("task_name") or "this task"
    where = f" (task directory {path})" if isinstance(path, str) and path else ""
    return f"Harbor task {name}{where}: {MISSING_INSTRUCTION}"


def _log(files: HarborFiles, trial_dir: Path, result: dict[str, Any]) -> str:
    """trial.log, the verifier's output, per-step results and the exception, each under its name (the end matters)."""
    sections = [(name, files.read_log(trial_dir / name)) for name in LOG_FILES if files.exists(trial_dir / name)]
    step_results = result.get("step_results")
    if isinstance(step_results, list) and step_results:
        sections.append(("step results", "\n".join(json.dumps(item, ensure_ascii=False) for item in step_results)))
    exception = result.get("exception_info") or {}
    failure = "\n".join(filter(None, [exception.get("exception_message"), exception.get("exception_traceback")]))
    if failure:
        sections.append((str(exception.get("exception_type") or "exception"), failure))
    return "\n".join(f"== {name} ==\n{text.rstrip()}" for name, text in sections if text.strip())


def _verifier_output(files: HarborFiles, trial_dir: Path) -> dict[str, str]:
    """What the verifier printed (verifier/test-stdout.txt, its end), as the trial's explanation beside its stages."""
    stdout = trial_dir / "verifier" / "test-stdout.txt"
    text = files.read_log(stdout).strip() if files.exists(stdout) else ""
    return {VERIFIER_EXPLANATION: text} if text else {}


def _step_stages(result: dict[str, Any]) -> dict[str, float]:
    """`stage_step_<n>` for each of result.json's `step_results` with a numeric reward (multi-step tasks)."""
    stages = {}
    for item in result.get("step_results") or []:
        reward = item.get("reward") if isinstance(item, dict) else None
        if isinstance(reward, int | float) and not isinstance(reward, bool) and isinstance(item.get("step"), int):
            stages[f"stage_step_{item['step']}"] = unit(reward)
    return stages


TIMES = {"startedAt": "started_at", "finishedAt": "finished_at"}  # result.json's times of the trial


def harbor_line(
    trial_dir: Path, job_name: str, files: HarborFiles | None = None, tasks: Path | None = None
) -> dict[str, Any]:
    """One trial directory as an ingest line (before grouping into runs)."""
    files = files or HarborFiles(trial_dir.parent)
    result_file = trial_dir / "result.json"
    for used in ("result.json", *TRIAL_FILES):
        if files.exists(trial_dir / used):
            files.inside(trial_dir / used)  # refused even when the reward in result.json means it is never read
    result = files.read_json(result_file)
    if not isinstance(result, dict):
        raise IngestError(0, files.name(result_file), "is not a JSON object")
    rewards = _rewards(files, trial_dir, result)
    reward = None if rewards is None else rewards.reward
    stages = {**_step_stages(result), **(rewards.stages if rewards else {})}  # per-step rewards are partial credit
    derived = rewards.derived if rewards else ""
    if reward is None and stages:
        reward = sum(stages.values()) / len(stages)
        derived = f"the mean of {len(stages)} steps' rewards in result.json's step_results"
    category: str | None
    exception = result.get("exception_info") or {}
    if exception.get("exception_type"):
        category = snake_case(exception["exception_type"])
    else:
        category = "verifier_failed" if reward is not None and reward < 1 else None
    agent = result.get("agent_info") or {}
    model = (agent.get("model_info") or {}).get("name")
    trajectory_file = trial_dir / "agent" / "trajectory.json"
    trajectory = files.read_json(trajectory_file) if files.exists(trajectory_file) else None
    task = result.get("task_name") or trial_dir.name
    spec = {"kind": "external", "source": "harbor", "task": task}
    if result.get("task_checksum"):
        spec["checksum"] = result["task_checksum"]
    config = _object(result, "config")
    return {
        "externalId": f"harbor:{result.get('id') or f'{job_name}/{trial_dir.name}'}",
        "environment": {"name": task, "spec": spec},
        "attempt": 1,
        "reward": reward,
        "stages": stages,
        "failureCategory": category,
        "log": _log(files, trial_dir, result),
        "explanations": {**_verifier_output(files, trial_dir), **({REWARD_EXPLANATION: derived} if derived else {})},
        "task": _instruction(result, trajectory, _task_roots(files.job, config, tasks)),
        "agent": f"{agent.get('name', 'harbor-agent')}{f' ({model})' if model else ''}",
        "trajectory": trajectory,
        **{key: result[name] for key, name in TIMES.items() if isinstance(result.get(name), str)},
        "_trial_name": result.get("trial_name") or trial_dir.name,
    }


def _has_result(directory: Path) -> bool:
    return (directory / "result.json").is_symlink() or (directory / "result.json").exists()


def _subdirectories(directory: Path) -> list[Path]:
    try:
        return sorted(child for child in directory.iterdir() if child.is_dir())
    except OSError as error:  # unreadable: say which directory, as every other refusal does
        raise IngestError(0, "path", f"{directory} cannot be read: {error.strerror or error}") from None


def trial_directories(job: Path) -> list[Path]:
    """The trial directories of a job: subdirectories holding a result.json (and no deeper ones: those are jobs)."""
    return [
        child
        for child in _subdirectories(job)
        if _has_result(child) and not any(_has_result(grandchild) for grandchild in _subdirectories(child))
    ]


def find_jobs(path: Path) -> list[Path]:
    """The Harbor job directories `path` is or holds; refused, saying what it is instead, when it is neither."""
    if not path.is_dir():
        raise IngestError(0, "path", f"{path} is not a directory")
    if trial_directories(path):
        return [path]
    jobs = [child for child in _subdirectories(path) if trial_directories(child)]
    for job in jobs:
        HarborFiles(path).inside(job)  # a job directory symlinked in from elsewhere is refused
    if jobs:
        return jobs
    if _has_result(path):
        detail = f"{path} is a Harbor trial directory, not a job; import its job directory {path.parent}"
    else:
        detail = (
            f"{path} is not a Harbor job directory (no trial directories with a result.json) and holds no job "
            "directories; nothing imported"
        )
    raise IngestError(0, "path", detail)


def read_harbor_job(
    path: Path, tasks: Path | None = None, label: str = "", seen: dict[str, str] | None = None
) -> list[ParsedTrial]:
    """Every trial of a Harbor job directory, validated, attempts numbered per task (runs of at most eight).
    `seen` maps the trial ids read so far (of this import's other jobs) to their directories: an id read twice is
    refused, naming both directories."""
    seen = {} if seen is None else seen
    if not path.is_dir():
        raise IngestError(0, "path", f"{path} is not a directory")
    files = HarborFiles(path, label)
    lines = []
    for trial_dir in trial_directories(path):
        try:
            line = harbor_line(trial_dir, path.name, files, tasks)
        except IngestError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            # The exception's text may quote the file; its type is enough to say what kind of damage it is.
            detail = f"unreadable Harbor trial ({type(error).__name__} while reading result.json)"
            raise IngestError(0, files.name(trial_dir), detail) from None
        line["_trial_dir"] = files.name(trial_dir)
        earlier = seen.setdefault(line["externalId"], line["_trial_dir"])
        if earlier != line["_trial_dir"]:
            trial_id = line["externalId"].removeprefix("harbor:")
            raise IngestError(
                0,
                line["_trial_dir"],
                f"its result.json id {trial_id} is also the id of {earlier}: each trial once per import "
                "(a job copied into the directory twice?); nothing was imported",
            )
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
            except IngestError as error:  # said without the value the rule quotes: it is file content
                raise IngestError(0, f"{trial_dir} ({error.field})", QUOTED.sub("", error.detail)) from None
    return parsed


def read_harbor(path: Path, tasks: Path | None = None) -> tuple[list[Path], list[ParsedTrial]]:
    """The job directories `path` is or holds, and every trial of them (all validated before anything is written)."""
    jobs = find_jobs(path)
    trials: list[ParsedTrial] = []
    seen: dict[str, str] = {}
    for job in jobs:
        trials.extend(read_harbor_job(job, tasks, job.name if job != path else "", seen))
    return jobs, trials
