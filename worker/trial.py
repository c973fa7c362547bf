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
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from domain.limits import max_trial_timeout_s
from domain.outcome import LOG_CAP_CHARS, VERIFIER_EXPLANATION, TrialOutcome
from domain.trajectory import HARNESS_TOOL, Content, Step, content_text, environment_step, message_step, step, tool_step
from domain.trial_log import LogEntry, ProgramOutput, keep_end, log_text
from domain.vocabulary import TrialStatus
from worker import agents, environments
from worker.agents import AgentFailure, Finish
from worker.agents.base import Event
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
    """
    started = datetime.now(UTC)
    masker = Masker(secret_values(spec, agent_config))
    deadline = time.monotonic() + (ceiling_s if ceiling_s is not None else max_trial_timeout_s())
    trial_sandbox = TrialSandbox(
        sandbox or SandboxSettings.from_environ(), seed=seed, trial=trial_number, owner=organization, deadline=deadline
    )
    try:
        try:
            env = environments.load(spec, trial_sandbox, masker, oracle=agent_config.get("kind") == "oracle")
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
            outcome = _episode(
                env, agent_config, world_seed, seed, max_steps, timeout_s, trial_sandbox, masker, on_step
            )
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


def _episode(
    env, agent_config, world_seed, seed, max_steps, timeout_s, sandbox, masker: Masker, on_step=None
) -> TrialOutcome:
    """Reset, the agent loop, and the score of one trial in an environment that has been loaded.

    The agent's time budget starts once the environment is up: an MCP server's start-up (initialize, tools/list)
    has its own budget, `startupTimeoutS`, and is not charged to the agent. The log it returns is whole: run_trial
    keeps its end.
    """
    log: list[LogEntry] = []
    started = datetime.now(UTC)
    try:
        task = env.reset(world_seed)
    except Exception as error:  # an environment that cannot even start: no score, no rollout
        category = getattr(error, "category", "environment_error")
        what = _failure_words(error, masker)
        log = [*env.log, f"environment could not start: {what}"]
        return TrialOutcome(
            status="error",
            reward=None,
            failure_category=category if category in ("resource_limit", "timeout") else "environment_error",
            stages={},
            steps=list(env.preamble),
            log=log_text(log, masker.text),
            started_at=started,
        )
    timeout_s = min(timeout_s, getattr(env, "agent_timeout_s", timeout_s))  # a Harbor task's own agent timeout
    deadline = time.monotonic() + timeout_s
    if sandbox.deadline is not None and sandbox.deadline < deadline:  # a build took some of the trial's clock
        deadline = sandbox.deadline
        timeout_s = max(0.0, round(deadline - time.monotonic(), 3))
    env.deadline = deadline
    steps: list[Step] = list(env.preamble)
    ended, observation = "finished", None
    agent = agents.load(agent_config, seed, sandbox, masker)
    try:
        agent.start(
            task.text, {**task.data, "environment": task.data.get("environment", env.name)}, env.tools(), max_steps
        )
        if agent.system_prompt:
            steps.append(step(len(steps) + 1, source="system", message=agent.system_prompt))
        for number in range(1, max_steps + 1):
            if on_step is not None:
                on_step(number)
            action = agent.act(observation, deadline)
            _event_steps(steps, action.events, masker)
            if isinstance(action, Finish):
                if action.reason == "out_of_tokens":
                    ended = "out_of_tokens"
                    log.append(f"out_of_tokens: {action.summary}")
                else:
                    log.append(f"agent finished: {action.summary}" if action.summary else "agent finished")
                if action.reason is None and (action.summary or action.message or action.reasoning):
                    steps.append(
                        message_step(
                            len(steps) + 1,
                            action.message or action.summary,
                            reasoning=action.reasoning,
                            tokens=action.tokens,
                            latency_ms=action.latency_ms,
                        )
                    )
                break
            called_at, clock = datetime.now(UTC), time.monotonic()
            content: Content
            failed = False  # the result is an error: recorded as such (domain.trajectory's rule)
            env.result_extra = {}  # what a result holds beside its content (MCP: structuredContent), set by call
            try:
                if action.error:  # arguments that are no JSON object: the error is the result, no call is made
                    raise environments.ToolError(action.error)
                content = env.call(action.tool, action.args)  # text, or content parts (MCP: text, image, resource…)
            except environments.ToolError as error:  # refused, or an MCP tool's isError result
                content, failed = f"error: {error}", True
            observation = content_text(content)  # the agent reads text; the step keeps the parts
            elapsed_ms = round((time.monotonic() - clock) * 1000, 3)
            steps.append(
                tool_step(
                    len(steps) + 1,
                    action.tool,
                    action.args,
                    masker.data(content),  # masked before the step caps it
                    call_id=action.call_id,
                    is_error=failed,
                    arguments_text=action.arguments_text,
                    result_extra=masker.data(env.result_extra),
                    started_at=called_at.isoformat(),
                    duration_ms=elapsed_ms,
                    message=action.message,
                    reasoning=action.reasoning,
                    tokens=action.tokens,
                    latency_ms=action.latency_ms,
                )
            )
            if time.monotonic() > deadline:
                ended = "timeout"
                log.append(f"timeout: the agent's time budget of {timeout_s:g}s used up after step {number}")
                break
        else:
            ended = "out_of_steps"
            log.append(f"step budget of {max_steps} used up")
    except AgentFailure as failure:
        _event_steps(steps, failure.events, masker)
        ended = failure.category
        log.append(f"{failure.category}: {failure}")
    except LimitExceeded as breach:
        ended = "resource_limit"
        log.append(f"resource_limit: {breach}")
    except SandboxUnavailable as problem:
        ended = "environment_error"
        log.append(f"the sandbox could not start: {problem}")
    except TimeoutError:
        ended = "timeout"
        log.append(f"timeout: the agent's time budget of {timeout_s:g}s used up waiting for the environment")
    except Exception as error:  # the environment itself raised mid-episode
        ended = "environment_error"
        log.append(f"environment raised: {_error_words(error, masker)}")
    finally:
        side_output = agent.close()
    if side_output:
        log.append(ProgramOutput("agent", side_output))  # its stderr, each line labelled as the agent's

    try:
        stages = env.score()
    except Exception as error:
        if isinstance(error, LimitExceeded) and ended == "finished":
            ended = "resource_limit"
        log = [*env.log, *log, f"environment could not score: {_failure_words(error, masker)}"]
        return TrialOutcome(
            status="error",
            reward=None,
            failure_category="environment_error" if ended == "finished" else ended,
            stages={},
            steps=steps,
            log=log_text(log, masker.text),
            started_at=started,
            task=task.text,
        )
    try:
        explanations = {
            key: text for key, text in env.explain().items() if key in stages or key == VERIFIER_EXPLANATION
        }
    except Exception as error:  # the words are a courtesy: a verifier that cannot give them still scored
        explanations = {}
        log.append(f"the verifier could not explain its scores: {_error_words(error, masker)}")
    # The mean of the stages, unless the environment's verifier gives the reward itself (a Harbor task's).
    reward = round(env.reward(stages) if hasattr(env, "reward") else sum(stages.values()) / len(stages), 6)
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
        steps=steps,
        log=log_text([*env.log, *log], masker.text),
        started_at=started,
        task=task.text,
        explanations=explanations,
    )
