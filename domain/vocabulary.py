"""The words of the domain, each defined once: roles, run and trial statuses, reset modes, failure categories."""

from __future__ import annotations

from typing import Literal, get_args

Role = Literal["owner", "member", "viewer"]
ROLES: tuple[Role, ...] = get_args(Role)

RunStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)

TrialStatus = Literal["succeeded", "failed", "error"]
TRIAL_STATUSES: tuple[TrialStatus, ...] = get_args(TrialStatus)

ResetMode = Literal["initial", "new_workspace", "new_world"]
RESET_MODES: tuple[ResetMode, ...] = get_args(ResetMode)  # what a run records
RESETS: tuple[ResetMode, ...] = ("new_workspace", "new_world")  # what a user may ask a reset for

# How a trial's loop can end abnormally (the environment's own diagnoses, e.g. wrong_item, come from its world).
LoopFailure = Literal[
    "gave_up",
    "tool_error",
    "out_of_steps",
    "out_of_tokens",
    "timeout",
    "agent_error",
    "agent_protocol_error",
    "environment_error",
    "resource_limit",
]
LOOP_FAILURES: tuple[LoopFailure, ...] = get_args(LoopFailure)

# What a built-in world's final state shows went wrong (worker/environments/admin_console.py and support_desk.py
# diagnose them), and what a verifier's end gives when it names no category of its own: a score below 1
# (task_incomplete) or no score at all (verifier_failed: a Harbor task's tests wrote no reward).
AdminConsoleFailure = Literal["wrong_item", "wrong_customer", "wrong_quantity", "insufficient_stock"]
SupportDeskFailure = Literal["wrong_ticket", "wrong_team", "wrong_priority", "missing_reference"]
VerifierFailure = Literal["task_incomplete", "verifier_failed"]
# Every category this worker gives (an MCP verifier may name one of its own, and imported trials keep theirs).
FAILURE_CATEGORIES: tuple[str, ...] = (
    *LOOP_FAILURES,
    *get_args(AdminConsoleFailure),
    *get_args(SupportDeskFailure),
    *get_args(VerifierFailure),
)

MIN_ATTEMPTS, MAX_ATTEMPTS = 1, 8  # attemptCount: independent trials per run

# What a member's visits leave on the first-run checklist (web/checklist.py, kept per member by migration 0043): it
# was shown while the organization had no run, they opened a failed trial, compared two runs, or hid it.
ChecklistMark = Literal["shown", "opened-failed-trial", "compared-runs", "hidden"]
CHECKLIST_MARKS: tuple[ChecklistMark, ...] = get_args(ChecklistMark)

# A trial's review state: nobody looked yet, somebody did, or it is kept out of training exports (with a reason).
ReviewState = Literal["unreviewed", "reviewed", "excluded"]
REVIEW_STATES: tuple[ReviewState, ...] = get_args(ReviewState)

# A label's colour, from a fixed palette whose chips (domain.triage.LABEL_PALETTE) read at 6:1 or better.
LabelColor = Literal["gray", "red", "orange", "yellow", "green", "teal", "blue", "purple", "pink"]
LABEL_COLORS: tuple[LabelColor, ...] = get_args(LabelColor)
