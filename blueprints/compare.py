"""Compare area: two runs, environment versions or dataset runs side by side, with intervals, charts and a
significance test."""

from __future__ import annotations

import uuid

from flask import Blueprint, abort, g, redirect, request, url_for

from domain import task_stats, task_verdict
from queries.compare import Comparison, SideRef, compare, compare_choices, find_side
from web.charts import funnel_chart, histogram_chart, pass_at_k_chart
from web.checklist import COMPARED_RUNS, reached
from web.database import request_session
from web.htmx import render
from web.limits import expensive
from web.params import given_args, optional_uuid, parse_uuid
from web.sides import SideRefused, picker_defaults, requested_sides

bp = Blueprint("compare", __name__)


def older_first(ids: list) -> list:
    """The two ticked ids with the older first (a run by its creation, a version by its number), so A is the older."""
    session = request_session()
    refs = [find_side(session, side_id) for side_id in ids]
    if any(ref is None for ref in refs):
        return ids

    def age(ref: SideRef | None) -> tuple:
        assert ref is not None
        if ref.kind in ("run", "dataset_run"):
            return (ref.kind, ref.created_at, ref.version, str(ref.id))
        return (ref.kind, ref.version)

    a, b = refs
    if a is not None and b is not None and a.kind == b.kind and age(b) < age(a):
        return [ids[1], ids[0]]
    return ids


def charts(result: Comparison) -> dict:
    """The page's SVG charts from the comparison's figures."""
    names = ("A: " + result.a.ref.label, "B: " + result.b.ref.label)
    tables = [{k: (e.value, e.low, e.high) for k, e in side.pass_at_k.items()} for side in (result.a, result.b)]
    stages = result.stage_keys
    return {
        "pass_at_k": pass_at_k_chart("pass@k with 95% intervals", list(zip(names, tables, strict=True))),
        "histograms": [
            histogram_chart(
                f"{'Reward' if s.histogram_unit == 'trials' else 'Task mean reward'} histogram, {side}",
                s.histogram,
                css,
                unit=s.histogram_unit,
            )
            for side, s, css in (("A", result.a, "series-a"), ("B", result.b, "series-b"))
        ],
        "funnel": funnel_chart(
            "Stage funnel (pipeline order)",
            stages,
            [
                (name, [s.stage_rate(key) for key in stages])
                for name, s in zip(names, (result.a, result.b), strict=True)
            ],
        )
        if stages
        else None,
    }


def picked_environment(args: dict[str, str]) -> uuid.UUID | None:
    """The environment of the sides a refused request named (A's, else B's), so the picker redraws its menus."""
    session = request_session()
    for name in ("a", "b"):
        side_id = parse_uuid(args.get(name, ""))
        ref = find_side(session, side_id) if side_id is not None else None
        if ref is not None and ref.environment_id is not None:
            return ref.environment_id
    return None


def pick(refused: SideRefused | None = None):
    """/compare with no sides: the picker (environment, then each side's version, run or dataset run and evaluator),
    whose form submits the a/b URL; `environmentId` narrows the version and run menus (an htmx change of the
    environment swaps the `sides` block alone). The sides start distinct (web.sides.picker_defaults): `with` (a
    run, from a run row's "compare" link) is B and the run before it of its version A, else the two newest
    versions, else the version's two newest runs.

    With `refused`, the picker drawn again with the submitted choices and the refusal in place, at 422 (404 for a
    side this organization has not): the htmx form swaps these answers too (data-swap-refusals, static/forms.js)."""
    args = given_args()
    environment_id = optional_uuid("environmentId")
    if refused is not None and environment_id is None:
        environment_id = picked_environment(args)
    menus = compare_choices(request_session(), environment_id)
    versions = menus["version"]
    shown = environment_id or (versions[0].environment_id if versions else None)
    offered = [v for v in versions if v.environment_id == shown]
    runs = [r for r in menus["run"] if r.environment_id == shown]
    if refused is not None:
        chosen = {key: parse_uuid(args.get(key, "")) for key in ("a", "b", "aEvaluatorConfigId", "bEvaluatorConfigId")}
    else:
        default_a, default_b = picker_defaults(offered, runs, menus["dataset_run"], optional_uuid("with"))
        chosen = {"a": default_a, "b": default_b, "aEvaluatorConfigId": None, "bEvaluatorConfigId": None}
    return render(
        "compare/pick.html",
        "sides",
        status=200 if refused is None else (404 if refused.status == 404 else 422),
        menus=menus,
        environment_id=shown,
        versions=offered,
        runs=runs,
        chosen=chosen,
        refused=refused,
    )


@bp.get("/compare")
@expensive()
def show():
    """/compare?a=…&b=…: the two sides, each a run, an environment version (optionally one evaluator) or a dataset
    run; with no sides, the picker.

    The run list's and version list's checkboxes submit `id` twice; that answer redirects to the a/b URL. A pair
    the page cannot compare (a side missing or malformed, an evaluator on a run, A equal to B, a side unknown here)
    redraws the picker with the refusal in place (422, or 404).
    """
    picked = request.args.getlist("id")
    if not picked and "a" not in request.args and "b" not in request.args:
        return pick()
    if picked and "a" not in request.args:
        ids = [parse_uuid(value) for value in picked]
        if len(ids) != 2 or None in ids:
            abort(400, description="Tick exactly two runs (or two versions) to compare.")
        return redirect(url_for("compare.show", **dict(zip("ab", older_first(ids), strict=True))), 303)
    try:
        a, b = requested_sides(request_session(), given_args())  # the picker sends an empty evaluator menu too
    except SideRefused as refused:
        return pick(refused)
    result = compare(request_session(), a, b)
    if a.kind == b.kind == "run":
        reached(g.org_id, COMPARED_RUNS)
    return render(
        "compare/show.html",
        result=result,
        charts=charts(result),
        methods=task_stats,
        words=task_verdict,
        dataset_run_url=lambda dataset_run_id: f"/dataset-runs/{dataset_run_id}",  # the dataset run's page (issue 44)
    )
