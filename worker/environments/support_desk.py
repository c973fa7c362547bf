"""support-desk: a ticket queue where the task is to triage, route and answer one customer ticket."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.specs import SupportDeskSpec
from domain.vocabulary import LoopFailure, SupportDeskFailure
from domain.worlds import PRIORITIES, TEAMS, Task, draw_desk
from worker.environments.base import Environment, ToolError, ToolSpec
from worker.environments.registry import TrialPlace, environment_of


def _one_of(value: Any, choices: tuple[str, ...], name: str) -> str:
    """`value` when it is one of `choices`; else the tool call fails naming them."""
    if value not in choices:
        raise ToolError(f"{name} must be one of {', '.join(choices)}")
    return value


@dataclass
class Ticket:
    """A customer ticket and what the agent did to it."""

    id: str
    subject: str
    body: str
    needs_team: str
    priority: str = "normal"
    team: str | None = None
    replies: tuple[str, ...] = ()


class SupportDesk(Environment):
    """Set a ticket's priority, assign it to the right team, and reply quoting the reference it needs."""

    name = "support-desk"
    tool_specs = (
        ToolSpec("list_tickets", "List open tickets with their subjects."),
        ToolSpec("read_ticket", "Show one ticket in full.", {"ticket_id": "string"}),
        ToolSpec(
            "set_priority",
            "Set a ticket's priority (low, normal, high, urgent).",
            {"ticket_id": "string", "priority": "string"},
        ),
        ToolSpec(
            "assign",
            "Assign a ticket to a team (billing, shipping, accounts, technical).",
            {"ticket_id": "string", "team": "string"},
        ),
        ToolSpec("reply", "Send the customer a reply on the ticket.", {"ticket_id": "string", "message": "string"}),
    )

    def reset(self, world_seed: int) -> Task:
        """Draw the ticket queue and the ticket to handle from `world_seed` (domain.worlds.draw_desk)."""
        drawn = draw_desk(self.params, world_seed)
        self.tickets: dict[str, Ticket] = {t.id: Ticket(t.id, t.subject, t.body, t.needs_team) for t in drawn.tickets}
        self.goal = dict(drawn.goal)
        self.note(f"opened support-desk (world {world_seed}): {len(self.tickets)} open tickets")
        return drawn.task

    def _ticket(self, ticket_id: Any) -> Ticket:
        ticket = self.tickets.get(ticket_id)
        if ticket is None:
            raise ToolError(f"no ticket {ticket_id!r}")
        return ticket

    def tool_list_tickets(self) -> str:
        self.note("list_tickets")
        return "\n".join(f"{t.id}  [{t.priority}]  {t.subject}" for t in self.tickets.values())

    def tool_read_ticket(self, ticket_id: Any) -> str:
        ticket = self._ticket(ticket_id)
        self.note(f"read {ticket.id}")
        return f"{ticket.id} priority={ticket.priority} team={ticket.team or '-'}\n{ticket.body}"

    def tool_set_priority(self, ticket_id: Any, priority: Any) -> str:
        ticket = self._ticket(ticket_id)
        ticket.priority = _one_of(priority, PRIORITIES, "priority")
        self.note(f"{ticket.id} priority -> {priority}")
        return f"{ticket.id} priority set to {priority}"

    def tool_assign(self, ticket_id: Any, team: Any) -> str:
        ticket = self._ticket(ticket_id)
        ticket.team = _one_of(team, TEAMS, "team")
        self.note(f"{ticket.id} assigned to {team}")
        return f"{ticket.id} assigned to {team}"

    def tool_reply(self, ticket_id: Any, message: Any) -> str:
        ticket = self._ticket(ticket_id)
        if not isinstance(message, str) or not message.strip():
            raise ToolError("message must be non-empty text")
        ticket.replies += (message,)
        self.note(f"replied on {ticket.id}")
        return f"reply sent on {ticket.id}"

    def score(self) -> dict[str, float]:
        """stage_triage: priority; stage_routing: team; stage_reply: a reply quoting the reference (0.5 without)."""
        goal = self.goal
        ticket = self.tickets[goal["ticket_id"]]
        replied = [r for r in ticket.replies if r.strip()]
        return {
            "stage_triage": 1.0 if ticket.priority == goal["priority"] else 0.0,
            "stage_routing": 1.0 if ticket.team == goal["team"] else 0.0,
            "stage_reply": 1.0 if any(goal["reference"] in r for r in replied) else 0.5 if replied else 0.0,
        }

    def explain(self) -> dict[str, str]:
        """Each stage's verdict in words: what the goal was and what the ticket holds."""
        goal = self.goal
        ticket = self.tickets[goal["ticket_id"]]
        replies = [r for r in ticket.replies if r.strip()]
        quoted = any(goal["reference"] in r for r in replies)
        return {
            "stage_triage": f"goal: priority {goal['priority']} on {ticket.id}; it is {ticket.priority}",
            "stage_routing": f"goal: {ticket.id} assigned to {goal['team']}; it is with {ticket.team or 'no team'}",
            "stage_reply": f"a reply quoting {goal['reference']} was sent"
            if quoted
            else f"{len(replies)} repl{'y' if len(replies) == 1 else 'ies'} sent, none quoting {goal['reference']}",
        }

    def diagnose(self) -> SupportDeskFailure | LoopFailure:
        """wrong_ticket, wrong_priority, wrong_team, missing_reference, tool_error or gave_up."""
        goal = self.goal
        touched = [t for t in self.tickets.values() if t.id != goal["ticket_id"] and (t.team or t.replies)]
        ticket = self.tickets[goal["ticket_id"]]
        if touched:
            return "wrong_ticket"
        if ticket.team not in (None, goal["team"]):
            return "wrong_team"
        if ticket.priority not in ("normal", goal["priority"]):
            return "wrong_priority"
        if ticket.replies and not any(goal["reference"] in r for r in ticket.replies):
            return "missing_reference"
        return "tool_error" if self.tool_errors else "gave_up"


@environment_of(SupportDeskSpec)
def start(spec: SupportDeskSpec, place: TrialPlace) -> SupportDesk:
    """A trial's support desk, with the spec's params."""
    return SupportDesk(spec.params.model_dump(mode="json"))
