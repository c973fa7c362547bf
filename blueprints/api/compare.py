"""GET /api/v1/compare: the compare page's figures and tests as JSON."""

from __future__ import annotations

from flask import jsonify, request

from blueprints.api import ApiError, bp
from blueprints.api.contract import Reply, operation
from blueprints.api.schemas import (
    CompareCategory,
    CompareEstimate,
    CompareEvaluator,
    CompareEvaluatorTest,
    CompareSide,
    CompareStage,
    CompareTask,
    CompareTaskSide,
    CompareTest,
    CompareTests,
    CompareWarning,
    Comparison,
)
from domain.task_stats import TaskEstimate, TaskTally, TaskTest
from queries.compare import Comparison as Compared
from queries.compare import Side, compare
from web.database import request_session
from web.limits import expensive
from web.sides import CompareQuery, requested_sides
from web.validation import Invalid


def _estimate(estimate: TaskEstimate, tasks: bool = False) -> CompareEstimate:
    return CompareEstimate(
        value=estimate.value,
        ci95=list(estimate.interval) if estimate.interval else None,
        stderr=estimate.stderr,
        tasks=estimate.tasks if tasks else None,
    )


def _task_side(tally: TaskTally | None, side: Side, key: str) -> CompareTaskSide | None:
    if tally is None:
        return None
    reward = tally.reward_sum / tally.scored if tally.scored else None
    status = side.unfinished[key][0] if key in side.unfinished else None
    return CompareTaskSide(
        trials=tally.attempts, successes=tally.successes, mean_reward=reward, finished=status is None, status=status
    )


def _side(side: Side, stage_keys: list[str]) -> CompareSide:
    ref = side.ref
    return CompareSide(
        kind=ref.kind,  # type: ignore[arg-type]
        id=ref.id,
        label=ref.label,
        evaluator_config_id=ref.evaluator_id,
        dataset_id=ref.dataset_id,
        dataset_version_id=ref.dataset_version_id,
        runs=side.runs,
        trials=side.trials,
        successes=side.successes,
        tasks=len(side.tasks),
        unfinished_tasks=len(side.unfinished),
        evaluators=[CompareEvaluator(id=e.id, label=e.label, runs=e.runs, trials=e.trials) for e in side.evaluators],
        mean_reward=_estimate(side.mean_reward),
        pass_at_k={str(k): _estimate(e, tasks=True) for k, e in sorted(side.pass_at_k.items())},
        stages={
            key: CompareStage(trials=side.stage_trials[key], passed=side.stage_passed[key], rate=side.stage_rate(key))
            for key in stage_keys
            if key in side.stage_trials
        },
        stage_order=[key for key in stage_keys if key in side.stage_trials],
        failure_categories={
            c: CompareCategory(trials=n, rate=side.category_rate(c)) for c, n in sorted(side.categories.items())
        },
    )


def _test(test: TaskTest, verdict: str) -> CompareTest:
    ci = [test.low, test.high] if test.low is not None and test.high is not None else None
    return CompareTest(
        method=test.method,
        difference=test.difference,
        ci95=ci,
        stderr=test.stderr,
        p_value=test.p_value,
        verdict=verdict,
    )


def comparison_answer(result: Compared) -> Comparison:
    """The comparison as the API shows it."""
    keys = result.stage_keys
    return Comparison(
        a=_side(result.a, keys),
        b=_side(result.b, keys),
        tests=CompareTests(
            paired=result.paired,
            unit="trial" if result.pass_at_1.one_task else "task",
            paired_tasks=result.pass_at_1.paired_tasks,
            shared_tasks=len(result.pairing.shared),
            no_verdict=result.no_verdict,
            pass_at1=_test(result.pass_at_1, result.pass_at_1_verdict),
            mean_reward=_test(result.mean_reward, result.mean_reward_verdict),
            by_evaluator=[
                CompareEvaluatorTest(evaluator_config_id=part.id, label=part.label, pass_at1=_test(test, verdict))
                for part, _, test, verdict in result.evaluator_verdicts
            ],
        ),
        warnings=[CompareWarning(code=w.code, message=w.message) for w in result.warnings],
        tasks=[
            CompareTask(
                task=row.task,
                text=result.task_text(row.task),
                a=_task_side(row.a, result.a, row.task),
                b=_task_side(row.b, result.b, row.task),
            )
            for row in result.task_rows
        ],
        tasks_truncated=result.tasks_truncated,
    )


@bp.get("/compare")
@operation(
    "compare",
    {
        200: Reply(
            "Both sides' figures with 95% intervals and task-clustered standard errors, the tests of B - A with the "
            "task as the unit (paired by task when the sides share their tasks; unpaired, over different draws, when "
            "they share none), warnings and the per-task table",
            Comparison,
        )
    },
    query=CompareQuery,
    errors=(400, 404, 429),
    error_reasons={
        404: "No such run, environment version, dataset run or evaluator configuration in this organization"
    },
)
@expensive()
def compare_sides():
    """Compare two runs, environment versions or dataset runs: pass@k with intervals, mean reward, stages,
    categories, tests (paired by task when the sides share their tasks; none for dataset runs of two datasets)."""
    session = request_session()
    try:
        a, b = requested_sides(session, request.args.to_dict())
    except Invalid as error:
        raise ApiError(error.status, error.error, error.detail) from None
    return jsonify(comparison_answer(compare(session, a, b)).to_json())
