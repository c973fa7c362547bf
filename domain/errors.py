"""Domain errors: bad input the domain refuses, each carrying the HTTP status a web answer should use."""

from __future__ import annotations


class DomainError(ValueError):
    """Input the domain refuses; `status` and `error` say how the web answers it (the message says why)."""

    status = 400
    error = "invalid input"


class SpecError(DomainError):
    """An environment version spec that does not describe a runnable environment (message says why)."""

    error = "invalid spec"


class AgentConfigError(DomainError):
    """An evaluator configuration's agent that cannot be run (message says why)."""

    error = "invalid agent"


class RunError(DomainError):
    """A run request that cannot be carried out (message names the valid values)."""

    error = "invalid run"
