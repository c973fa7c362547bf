"""The built-in scripted agent: follows the task's plan through the real tools and, below full skill, errs.

Each step it may, with probability (1 - skill) * ERROR_RATE, make one mistake
a real agent makes: a wrong item, a wrong quantity, a malformed tool call, giving
up, or dithering until it runs out of steps. The failure category of the trial
then comes from the state the environment is left in, never from a label.
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

from domain import agents as configs
from worker.agents.base import Action, Agent, AgentFailure, Finish, ToolCall
from worker.agents.registry import agent_of
from worker.masking import Masker
from worker.sandbox import TrialSandbox

ERROR_RATE = 0.35
ITEM_ARGS = ("sku", "customer_id", "ticket_id", "team", "priority")
# How often each kind of mistake is picked, among those that fit the call at hand.
MISTAKE_WEIGHTS = {
    "wrong_item": 3,
    "wrong_quantity": 3,
    "forget_reference": 3,
    "malformed": 2,
    "give_up": 1,
    "dither": 1,
}


def _admin_console_plan(data: dict[str, Any]) -> list[ToolCall]:
    return [
        ToolCall("list_inventory", {}),
        ToolCall("restock", {"sku": data["sku"], "quantity": data["restock"]}),
        ToolCall("list_customers", {}),
        ToolCall(
            "create_order", {"customer_id": data["customer_id"], "sku": data["sku"], "quantity": data["quantity"]}
        ),
        ToolCall("checkout", {"order_id": "<from create_order>"}),
    ]


def _support_desk_plan(data: dict[str, Any]) -> list[ToolCall]:
    ticket = data["ticket_id"]
    return [
        ToolCall("list_tickets", {}),
        ToolCall("read_ticket", {"ticket_id": ticket}),
        ToolCall("set_priority", {"ticket_id": ticket, "priority": data["priority"]}),
        ToolCall("assign", {"ticket_id": ticket, "team": data["team"]}),
        ToolCall("reply", {"ticket_id": ticket, "message": f"We are on it; your reference is {data['reference']}."}),
    ]


PLANS = {"admin-console": _admin_console_plan, "support-desk": _support_desk_plan}


class ScriptedAgent(Agent):
    """Plays the plan for the task's environment with a seeded chance of each kind of mistake."""

    def __init__(self, skill: float, seed: int, step_delay_s: float = 0.0) -> None:
        self.skill = skill
        self.rng = random.Random(seed)
        self.step_delay_s = step_delay_s
        self.plan: list[ToolCall] = []
        self.swaps: dict[Any, Any] = {}
        self.dithering = False
        self.retry: ToolCall | None = None

    def start(self, task_text: str, task_data: dict[str, Any], tools: list[dict[str, Any]], max_steps: int) -> None:
        self.data = task_data
        if task_data.get("environment") not in PLANS:
            raise AgentFailure(
                f"the scripted agent plays the built-in worlds ({', '.join(sorted(PLANS))}) only, "
                f"not {task_data.get('environment')!r}"
            )
        self.plan = PLANS[task_data["environment"]](task_data)
        self.listing = next(t["name"] for t in tools if not t["parameters"])

    def act(self, observation: str | None, deadline: float) -> Action:
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        if observation and (order := re.search(r"ORD-\d+", observation)):
            self.swaps["<from create_order>"] = order.group(0)
        if self.dithering:
            return ToolCall(self.listing, {})
        if self.retry is not None:
            call, self.retry = self.retry, None
            return call
        if not self.plan:
            return Finish("done")
        call = self._resolve(self.plan.pop(0))
        if self.rng.random() < (1 - self.skill) * ERROR_RATE:
            return self._err(call)
        return call

    def _resolve(self, call: ToolCall) -> ToolCall:
        """Apply earlier mistakes (a wrong item stays wrong) and fill values learned from observations."""
        return ToolCall(call.tool, {k: self.swaps.get(v, v) for k, v in call.args.items()})

    def _err(self, call: ToolCall) -> Action:
        """Make one mistake on `call`, chosen among those that fit it."""
        item_args = [k for k in call.args if k in ITEM_ARGS and self.data["distractors"].get(k)]
        options = ["malformed", "give_up", "dither"]
        if item_args:
            options.append("wrong_item")
        if "quantity" in call.args:
            options.append("wrong_quantity")
        if "message" in call.args:
            options.append("forget_reference")
        mistake = self.rng.choices(options, weights=[MISTAKE_WEIGHTS[o] for o in options])[0]
        args = dict(call.args)
        if mistake == "wrong_item":
            key = self.rng.choice(item_args)
            wrong = self.rng.choice(self.data["distractors"][key])
            self.swaps[args[key]] = wrong
            args[key] = wrong
        elif mistake == "wrong_quantity":
            args["quantity"] = max(1, args["quantity"] + self.rng.choice((-3, -2, -1, 1, 2, 3)))
        elif mistake == "forget_reference":
            args["message"] = "We are looking into it."
        elif mistake == "malformed":
            self.retry = call if self.rng.random() < self.skill else None
            if self.retry is None:
                self.plan.clear()
            return ToolCall(call.tool, {}) if call.args else ToolCall(call.tool + "s", {})
        elif mistake == "give_up":
            return Finish("giving up")
        else:
            self.dithering = True
            return ToolCall(self.listing, {})
        return ToolCall(call.tool, args)


@agent_of(configs.ScriptedAgent)
def start(config: configs.ScriptedAgent, seed: int, sandbox: TrialSandbox, masker: Masker | None) -> ScriptedAgent:
    """The scripted agent of one trial: the config's skill, the trial's seed."""
    return ScriptedAgent(config.skill, seed, config.stepDelayS)
