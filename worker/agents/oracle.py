"""The oracle: a Harbor task's reference solution as an agent, the way Harbor users check that a task can be solved.

It makes one call, `bash` running `bash /solution/solve.sh` (the environment shows solution/ at /solution to this
agent alone), then finishes, saying how the script exited.
"""

from __future__ import annotations

from typing import Any

from domain import agents as configs
from worker.agents.base import Action, Agent, AgentFailure, Finish, ToolCall
from worker.agents.registry import agent_of
from worker.masking import Masker
from worker.sandbox import TrialSandbox

SOLVE = "bash /solution/solve.sh"


class OracleAgent(Agent):
    """Runs the task's solution/solve.sh once, then finishes."""

    def __init__(self) -> None:
        self.ran = False

    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        if task_data.get("environment") != "harbor-task" or not any(tool["name"] == "bash" for tool in tools):
            raise AgentFailure(
                "the oracle runs a Harbor task's solution/solve.sh; this environment is not a Harbor task"
            )

    def act(self, observation: str | None, deadline: float) -> Action:
        if not self.ran:
            self.ran = True
            return ToolCall(tool="bash", args={"command": SOLVE}, call_id="oracle_solve")
        ended = (observation or "").rsplit("[", 1)[-1].rstrip("]") if observation else "no output"
        return Finish(summary=f"solution/solve.sh ran ({ended})")

    def close(self) -> str:
        return ""


@agent_of(configs.OracleAgent)
def start(config: configs.OracleAgent, seed: int, sandbox: TrialSandbox, masker: Masker | None) -> OracleAgent:
    """The oracle of one trial (the Harbor task's environment runs its solution)."""
    return OracleAgent()
