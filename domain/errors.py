"""Domain errors: bad input the domain refuses, each carrying the HTTP status a web answer should use."""

from __future__ import annotations


class DomainError(ValueError):
    """Input the domain refuses; `status` and `error` say how the web answers it (the message says why).

    One handler maps every DomainError to its answer: JSON `{"error", "detail"}` under /api/, a page elsewhere.
    """

    status = 400
    error = "invalid input"

    def __init__(self, detail: str, *, error: str | None = None) -> None:
        super().__init__(detail)
        if error is not None:
            self.error = error


class SpecError(DomainError):
    """An environment version spec that does not describe a runnable environment (message says why)."""

    error = "invalid spec"


class AgentConfigError(DomainError):
    """An evaluator configuration's agent that cannot be run (message says why)."""

    error = "invalid agent"


class RunError(DomainError):
    """A run request that cannot be carried out (message names the valid values)."""

    error = "invalid run"


class RunNotResettable(RunError):
    """A reset this worker cannot carry out now: the run is still queued or running, or its results were imported."""

    status = 409
    error = "cannot reset"


class NotRunnableHere(RunError):
    """A run asked of a version or evaluator that holds imported results (its environment or agent ran in another
    harness): no worker here can run it. 422, nothing written; `field` is the API name of the one to change."""

    status = 422

    def __init__(self, detail: str, *, field: str) -> None:
        super().__init__(detail, error=f"invalid {field}")
        self.field = field


class NotFoundInOrg(DomainError, LookupError):
    """An id that does not exist in the current organization (or exists only in another one): 404, like a miss."""

    status = 404
    error = "not found"


class Forbidden(DomainError):
    """A change the caller's role or authorship does not allow (another member's note): 403, nothing written."""

    status = 403
    error = "forbidden"


class TriageRefused(DomainError):
    """A triage change that breaks a rule of the write (excluded without a reason, an unknown label name, a step
    the trial does not have): 422, nothing written; `field` names the field to change."""

    status = 422

    def __init__(self, detail: str, *, field: str) -> None:
        super().__init__(detail, error=f"invalid {field}")
        self.field = field


class NameTaken(DomainError):
    """A name one of the organization's things already has, or one that looks like it (a label `fIaky` beside
    `flaky`): 409, nothing written; the message names what holds it."""

    status = 409
    error = "name taken"


class ClaimHeld(DomainError):
    """A trial another reviewer holds in their review queue (their claim is live): 409, nothing written; the
    message names who and until when."""

    status = 409
    error = "claimed"


class UndoRefused(DomainError):
    """An undo that would not restore what its decision found: nothing left to undo in the queue, or the trial
    changed since the decision (another reviewer's change would be lost). 409, nothing written."""

    status = 409
    error = "cannot undo"
