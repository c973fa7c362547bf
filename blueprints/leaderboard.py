"""A dataset version's leaderboard as a page section: the ranked evaluators with their intervals and tests against the
best row, and the checkpoints' chart. `leaderboard_context` gives what templates/datasets/_leaderboard.html draws, so
the dataset's page can include the section; /datasets/<id>/leaderboard serves it alone (htmx: the fragment)."""

from __future__ import annotations

import uuid
from typing import Any

from flask import Blueprint, abort
from sqlalchemy.orm import Session

from domain import task_verdict
from domain.rules import integer_from
from queries.datasets import DatasetSummary, find_dataset
from queries.leaderboard import HOLM_METHOD, Leaderboard, board_version, leaderboard
from web.charts import Chart, checkpoint_chart
from web.database import request_session
from web.htmx import render
from web.params import query_value

bp = Blueprint("leaderboard", __name__)

LARGEST_VERSION = 2**31 - 1


def checkpoints_chart(board: Leaderboard) -> Chart | None:
    """pass@1 with its 95% interval against the training step of the evaluators that have one (None without any)."""
    points = [
        (row.step, row.evaluator_name, row.pass_at_1.value, row.pass_at_1.low, row.pass_at_1.high)
        for row in board.checkpoints
        if row.step is not None
    ]
    return checkpoint_chart("pass@1 by training step", points) if points else None


def leaderboard_context(session: Session, dataset: DatasetSummary, version: int | None = None) -> dict[str, Any]:
    """What the leaderboard section draws for `dataset`'s version `version` (its latest when None): `board` (None
    when the dataset has no such version), `checkpoints` (the chart, or None), `dataset` and the method's words."""
    found = board_version(session, dataset.id, version)
    board = leaderboard(session, found) if found is not None else None
    return {
        "dataset": dataset,
        "board": board,
        "checkpoints": checkpoints_chart(board) if board is not None else None,
        "method": HOLM_METHOD,
        "words": task_verdict,
    }


@bp.get("/datasets/<uuid:dataset_id>/leaderboard")
def show(dataset_id: uuid.UUID):
    """/datasets/<id>/leaderboard?version=N: the version's leaderboard section (a fragment for htmx)."""
    version = query_value("version", integer_from(1, LARGEST_VERSION))
    session = request_session()
    dataset = find_dataset(session, dataset_id)
    if dataset is None:
        abort(404, description=f"No dataset {dataset_id} in this organization.")
    context = leaderboard_context(session, dataset, version)
    if context["board"] is None and version is not None:
        abort(404, description=f"No version {version} of the dataset {dataset.name}.")
    return render("datasets/leaderboard.html", block="leaderboard", **context)
