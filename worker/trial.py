"""One trial: reset the environment, run the agent loop within a step and time budget, score the stages.

Every trial that ends is scored from the state the environment was left in
(an agent crash or timeout still scores); only an environment that cannot run
gives reward None. The failure category says how the loop ended when it ended
abnormally, else what the environment diagnoses from its final state.

The trial's secrets (the env values of its spec and agent config) are masked
in everything it records, and before anything is cut: the agent and the
environment get the trial's Masker for what their programs print, and the
runner masks each observation before a step caps it and the log before it
keeps the log's end. The log holds the worker's own lines, one line each, and
what programs printed with each line labelled (`agent | …`): see
domain/trial_log.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from domain.agents import AgentModel, OracleAgent, agent_model
from domain.limits import max_trial_timeout_s
from domain.outcome import LOG_CAP_CHARS, REWARD_EXPLANATION, VERIFIER_EXPLANATION, TrialOutcome
from domain.specs import spec_model
from domain.trajectory import HARNESS_TOOL, Step, content_text, environment_step, message_step, step, tool_step
from domain.trial_log import LogEntry, ProgramOutput, keep_end, log_text
from domain.vocabulary import LoopFailure, TrialStatus
from domain.worlds import Task
from worker import agents, environments
from worker.agents import Agent, AgentFailure, Finish
from worker.agents.base import Event, ToolCall
from worker.environments import ToolResult, TrialEnvironment, TrialPlace
from worker.masking import Masker, mask_outcome, secret_values
from worker.sandbox import LimitExceeded, SandboxSettings, SandboxUnavailable, TrialSandbox

INPUT_QUOTE_CHARS = 200  # how much of an input pydantic refused (an MCP server's answer) the log quotes


def _event_steps(steps: list[Step], events: tuple[Event, ...], masker: Masker) -> None:
    """Append what the agent's harness did on its own before its answer as environment steps (masked, then capped)."""
    for event in events:
        command, observation = masker.text(event.command), masker.text(event.observation)
        steps.append(environment_step(len(steps) + 1, command, observation, tool=HARNESS_TOOL))


def _error_words(error: Exception, masker: Masker) -> str:
    """An exception as `Type: message`. A pydantic ValidationError (an MCP server's answer the SDK refused) is
    written from its errors, each input masked and then cut: pydantic's own message cuts the input first."""
    if not isinstance(error, ValidationError):
        return f"{type(error).__name__}: {error}"
    said = "; ".join(
        f"{'.'.join(map(str, e['loc']))}: {e['msg']} (input {masker.text(repr(e.get('input')))[:INPUT_QUOTE_CHARS]})"
        for e in error.errors(include_url=False)
    )
    return f"ValidationError: {error.error_count()} validation error(s) for {error.title}: {said}"


def _failure_words(error: Exception, masker: Masker) -> str:
    """An exception as a log line: sandbox problems and limit breaches in their own words, others with their type."""
    if isinstance(error, SandboxUnavailable):
        return f"the sandbox could not start: {error}"
    if isinstance(error, LimitExceeded):
        return f"resource_limit: {error}"
    if getattr(error, "category", None) == "timeout" or getattr(error, "plain", False):
        return str(error)  # an MCP server that did not answer its handshake in time; a Harbor task's failed build
    return _error_words(error, masker)


def _recorded(outcome: TrialOutcome, masker: Masker) -> TrialOutcome:
    """The outcome as it is recorded: its log masked, then cut to its last LOG_CAP_CHARS characters (from the start
    of a line); then every string of it masked once more (the task, arguments, stage keys: what no cut touched)."""
    outcome.log = keep_end(masker.text(outcome.log), LOG_CAP_CHARS)
    return mask_outcome(outcome, masker.values)


def run_trial(
    spec: dict[str, Any],
    agent_config: dict[str, Any],
    *,
    world_seed: int,
    seed: int,
    max_steps: int,
    timeout_s: float,
    ceiling_s: float | None = None,
    organization: str = "shared",
    trial_number: int = 1,
    sandbox: SandboxSettings | None = None,
    on_step: Callable[[int], None] | None = None,
) -> TrialOutcome:
    """Run one episode of `agent_config` in the environment `spec` describes and score it.

    `timeout_s` is the agent's time budget; `ceiling_s` (the operator's AGENTFORGE_MAX_TRIAL_TIMEOUT_S) bounds the
    whole trial from here on: a Harbor task's build, the agent and the verifier together. `organization` is whose
    trial it is (a Harbor task's build is kept for that organization alone).

    Every program the spec or the agent config names runs in this trial's sandbox, which is torn down (every
    process killed, every workspace removed) before the outcome is returned. `on_step(n)` is called as the agent
    begins its step n (the run page shows it). The outcome holds no secret of the spec's or the agent's `env`.
    AgentConfigError when the agent config is not one (the spec's own refusal is the trial's environment_error).
    """
    started = datetime.now(UTC)
    masker = Masker(secret_values(spec, agent_config))
    agent = agent_model(agent_config)  # checked once, run as its model
    deadline = time.monotonic() + (ceiling_s if ceiling_s is not None else max_trial_timeout_s())
    trial_sandbox = TrialSandbox(
        sandbox or SandboxSettings.from_environ(), seed=seed, trial=trial_number, owner=organization, deadline=deadline
    )
    try:
        try:
            place = TrialPlace(trial_sandbox, masker, oracle=isinstance(agent, OracleAgent))
            env = environments.load(spec_model(spec), place)
        except Exception as error:  # a spec that cannot become an environment: no score, no rollout
            failed = TrialOutcome(
                status="error",
                reward=None,
                failure_category="environment_error",
                stages={},
                steps=[],
                log=log_text([f"environment could not start: {_error_words(error, masker)}"], masker.text),
                started_at=started,
            )
            return _recorded(failed, masker)
        try:
            outcome = _episode(env, Run(agent, world_seed, seed, max_steps, timeout_s, trial_sandbox, masker, on_step))
        finally:
            side_output = env.close()  # MCP: stops the server process; its stderr goes to the log
    finally:
        trial_sandbox.close()
    outcome.started_at = started
    outcome.tools = outcome.tools or env.tools()
    if side_output:
        server = log_text([ProgramOutput("server", side_output)], masker.text)
        outcome.log = f"{outcome.log}\n{server}" if outcome.log else server
    return _recorded(outcome, masker)


@dataclass(frozen=True)
class Run:
    """What one episode is run with: the agent's checked config, the seeds, the budgets, the trial's sandbox and
    the Masker of its secrets, and who is told of each step."""

    agent: AgentModel
    world_seed: int
    seed: int
    max_steps: int
    timeout_s: float
    sandbox: TrialSandbox
    masker: Masker
    on_step: Callable[[int], None] | None = None


@dataclass
class Loop:
    """How the agent loop went: the steps so far (the environment's preamble first), the loop's log lines, how it
    ended (finished, or the failure category of its end) and the agent's time budget in seconds."""

    steps: list[Step]
    timeout_s: float
    log: list[LogEntry] = field(default_factory=list)
    ended: LoopFailure | str = "finished"


def _episode(env: TrialEnvironment, run: Run) -> TrialOutcome:
    """Reset, the agent loop, and the score of one trial in an environment that has been loaded.

    The agent's time budget starts once the environment is up: an MCP server's start-up (initialize, tools/list)
    has its own budget, `startupTimeoutS`, and is not charged to the agent. The log it returns is whole: run_trial
    keeps its end.
    """
    started = datetime.now(UTC)
    task = _reset(env, run, started)
    if isinstance(task, TrialOutcome):
        return task
    loop = _agent_loop(env, task, run)
    return _score(env, task, loop, run.masker, started)


def _reset(env: TrialEnvironment, run: Run, started: datetime) -> Task | TrialOutcome:
    """The task of the world the seed draws, or the error outcome of an environment that cannot even start (no
    score, no rollout)."""
    try:
        return env.reset(run.world_seed)
    except Exception as error:
        category = getattr(error, "category", "environment_error")
        log = [*env.log, f"environment could not start: {_failure_words(error, run.masker)}"]
        return TrialOutcome(
            status="error",
            reward=None,
            failure_category=category if category in ("resource_limit", "timeout") else "environment_error",
            stages={},
            steps=list(env.preamble),
            log=log_text(log, run.masker.text),
            started_at=started,
        )


def _agent_loop(env: TrialEnvironment, task: Task, run: Run) -> Loop:
    """The agent acts until it finishes or a budget (steps, time) or a failure ends the loop; every step recorded."""
    timeout_s = env.agent_timeout_s(run.timeout_s)  # a Harbor task's own agent timeout may be shorter
    deadline = time.monotonic() + timeout_s
    if run.sandbox.deadline is not None and run.sandbox.deadline < deadline:  # a build took some of the trial's clock
        deadline = run.sandbox.deadline
        timeout_s = max(0.0, round(deadline - time.monotonic(), 3))
    loop = Loop(list(env.preamble), timeout_s)
    agent = agents.load(run.agent, run.seed, run.sandbox, run.masker)
    try:
        _act(env, agent, task, loop, run, deadline)
    except AgentFailure as failure:
        _event_steps(loop.steps, failure.events, run.masker)
        loop.ended = failure.category
        loop.log.append(f"{failure.category}: {failure}")
    except LimitExceeded as breach:
        loop.ended = "resource_limit"
        loop.log.append(f"resource_limit: {breach}")
    except SandboxUnavailable as problem:
        loop.ended = "environment_error"
        loop.log.append(f"the sandbox could not start: {problem}")
    except TimeoutError:
        loop.ended = "timeout"
        loop.log.append(f"timeout: the agent's time budget of {timeout_s:g}s used up waiting for the environment")
    except Exception as error:  # the environment itself raised mid-episode
        loop.ended = "environment_error"
        loop.log.append(f"environment raised: {_error_words(error, run.masker)}")
    finally:
        side_output = agent.close()
    if side_output:
        loop.log.append(ProgramOutput("agent", side_output))  # its stderr, each line labelled as the agent's
    return loop


def _act(env: TrialEnvironment, agent: Agent, task: Task, loop: Loop, run: Run, deadline: float) -> None:
    """Start the agent on the task and run its steps until it finishes or its step or time budget is used up."""
    steps, masker = loop.steps, run.masker
    agent.start(
        task.text, {**task.data, "environment": task.data.get("environment", env.name)}, env.tools(), run.max_steps
    )
    if agent.system_prompt:
        steps.append(step(len(steps) + 1, source="system", message=agent.system_prompt))
    observation = None
    for number in range(1, run.max_steps + 1):
        if run.on_step is not None:
            run.on_step(number)
        action = agent.act(observation, deadline)
        _event_steps(steps, action.events, masker)
        if isinstance(action, Finish):
            _finished(action, loop)
            return
        called_at, clock = datetime.now(UTC), time.monotonic()
        result, failed = _call(env, action, deadline)  # failed: the result is an error, recorded as such
        observation = content_text(result.content)  # the agent reads text; the step keeps the parts
        steps.append(
            tool_step(
                len(steps) + 1,
                action.tool,
                action.args,
                masker.data(result.content),  # masked before the step caps it
                call_id=action.call_id,
                is_error=failed,
                arguments_text=action.arguments_text,
                result_extra=masker.data(result.extra),
                started_at=called_at.isoformat(),
                duration_ms=round((time.monotonic() - clock) * 1000, 3),
                message=action.message,
                reasoning=action.reasoning,
                tokens=action.tokens,
                latency_ms=action.latency_ms,
            )
        )
        if time.monotonic() > deadline:
            loop.ended = "timeout"
            loop.log.append(f"timeout: the agent's time budget of {loop.timeout_s:g}s used up after step {number}")
            return
    loop.ended = "out_of_steps"
    loop.log.append(f"step budget of {run.max_steps} used up")


def _finished(action: Finish, loop: Loop) -> None:
    """The agent's own end: out of tokens, or finished with its last words as a message step."""
    if action.reason == "out_of_tokens":
        loop.ended = "out_of_tokens"
        loop.log.append(f"out_of_tokens: {action.summary}")
    else:
        loop.log.append(f"agent finished: {action.summary}" if action.summary else "agent finished")
    if action.reason is None and (action.summary or action.message or action.reasoning):
        loop.steps.append(
            message_step(
                len(loop.steps) + 1,
                action.message or action.summary,
                reasoning=action.reasoning,
                tokens=action.tokens,
                latency_ms=action.latency_ms,
            )
        )


def _call(env: TrialEnvironment, action: ToolCall, deadline: float) -> tuple[ToolResult, bool]:
    """One tool call's result, and whether it is an error (refused, or an MCP tool's isError result)."""
    try:
        if action.error:  # arguments that are no JSON object: the error is the result, no call is made
            raise environments.ToolError(action.error)
        return env.call(action.tool, action.args, deadline), False  # text, or content parts (MCP: image, resource…)
    except environments.ToolError as error:
        return ToolResult(f"error: {error}"), True


def _score(env: TrialEnvironment, task: Task, loop: Loop, masker: Masker, started: datetime) -> TrialOutcome:
    """The outcome of the state the loop left: the verifier's stages, its words and the reward (an environment that
    cannot score gives an error outcome without one)."""
    ended, log = loop.ended, loop.log
    try:
        stages = env.score()
    except Exception as error:
        if isinstance(error, LimitExceeded) and ended == "finished":
            ended = "resource_limit"
        whole = [*env.log, *log, f"environment could not score: {_failure_words(error, masker)}"]
        return TrialOutcome(
            status="error",
            reward=None,
            failure_category="environment_error" if ended == "finished" else ended,
            stages={},
            steps=loop.steps,
            log=log_text(whole, masker.text),
            started_at=started,
            task=task.text,
        )
    try:
        explanations = {
            key: text
            for key, text in env.explain().items()
            if key in stages or key in (VERIFIER_EXPLANATION, REWARD_EXPLANATION)
        }
    except Exception as error:  # the words are a courtesy: a verifier that cannot give them still scored
        explanations = {}
        log.append(f"the verifier could not explain its scores: {_error_words(error, masker)}")
    reward = round(env.reward(stages), 6)  # the mean of the stages, unless the verifier gives it (a Harbor task's)
    if reward == 1:
        status: TrialStatus
        status, category = "succeeded", None
    else:
        status, category = "failed", env.diagnose() if ended == "finished" else ended
    return TrialOutcome(
        status=status,
        reward=reward,
        failure_category=category,
        stages=stages,
        steps=loop.steps,
        log=log_text([*env.log, *log], masker.text),
        started_at=started,
        task=task.text,
        explanations=explanations,
    )
