"""Typed ORM tables only, one module per aggregate; the writes live in writes/, the reads in queries/."""

from models.accounts import AuthSession, LoginThrottle, Membership, Organization, User
from models.base import Base
from models.checklist import ChecklistMark
from models.datasets import Dataset, DatasetRun, DatasetRunTask, DatasetTask, DatasetVersion
from models.environments import Environment, EnvironmentVersion, EvaluatorConfig
from models.evaluations import Artifact, EvaluationRun, EvaluationTrial, Rollout, TrialStage
from models.invitations import Invitation
from models.review_queues import ReviewClaim, ReviewQueue
from models.rollups import (
    EnvironmentVersionStats,
    EvaluatorCategoryCount,
    EvaluatorStageRollup,
    FailureCategoryCount,
    StageMetricRollup,
)
from models.tokens import ApiToken
from models.triage import Label, TrialAuditEntry, TrialLabel, TrialNote, TrialReview
from models.workers import WorkerPresence

__all__ = [
    "ApiToken",
    "Artifact",
    "AuthSession",
    "Base",
    "ChecklistMark",
    "Dataset",
    "DatasetRun",
    "DatasetRunTask",
    "DatasetTask",
    "DatasetVersion",
    "Environment",
    "EnvironmentVersion",
    "EnvironmentVersionStats",
    "EvaluationRun",
    "EvaluationTrial",
    "EvaluatorCategoryCount",
    "EvaluatorConfig",
    "EvaluatorStageRollup",
    "FailureCategoryCount",
    "Invitation",
    "Label",
    "LoginThrottle",
    "Membership",
    "Organization",
    "ReviewClaim",
    "ReviewQueue",
    "Rollout",
    "StageMetricRollup",
    "TrialAuditEntry",
    "TrialLabel",
    "TrialNote",
    "TrialReview",
    "TrialStage",
    "User",
    "WorkerPresence",
]
