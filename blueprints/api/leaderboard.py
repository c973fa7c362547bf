"""GET /api/v1/datasets/{datasetId}/leaderboard: a dataset version's evaluators ranked by pass@1, each tested against
the best row with Holm's correction, and the checkpoints' pass@1 by training step."""

from __future__ import annotations

import uuid

from flask import jsonify, request

from blueprints.api import ApiError, bp
from blueprints.api.contract import Reply, operation
from blueprints.api.leaderboard_schemas import LeaderboardAnswer, LeaderboardQuery
from queries.datasets import find_dataset
from queries.leaderboard import board_version, leaderboard
from web.database import request_session
from web.validation import Invalid, parse


@bp.get("/datasets/<uuid:dataset_id>/leaderboard")
@operation(
    "getDatasetLeaderboard",
    {200: Reply("Every evaluator that ran the version, by pass@1, and the checkpoints by step", LeaderboardAnswer)},
    query=LeaderboardQuery,
    errors=(400, 404),
    error_reasons={404: "No such dataset in this organization, or no such version of it (`field` says version)"},
)
def dataset_leaderboard(dataset_id: uuid.UUID):
    """A dataset version's leaderboard (`?version=N`, the latest by default): each evaluator's newest dataset run
    with pass@1, pass@k and mean reward (task-clustered 95% intervals), trials, tokens and the date, tested against
    the best row paired by task with Holm's correction across the table; `checkpoints` the evaluators with a step."""
    try:
        query = parse(LeaderboardQuery, request.args.to_dict())
    except Invalid as error:
        raise ApiError(error.status, error.error, error.detail, field=error.error.split(" ", 1)[-1]) from None
    session = request_session()
    if find_dataset(session, dataset_id) is None:
        raise ApiError(404, "not found", f"no dataset {dataset_id}")
    version = board_version(session, dataset_id, query.version)
    if version is None:
        which = f"no version {query.version}" if query.version is not None else "no version yet"
        raise ApiError(404, "not found", f"{which} of dataset {dataset_id}", field="version")
    board = leaderboard(session, version)
    return jsonify(LeaderboardAnswer.of_board(dataset_id, board).to_json())
