"""Compare area: two runs, environment versions or dataset runs side by side, with intervals, charts and a
significance test."""

from __future__ import annotations

from flask import Blueprint, abort, g, redirect, request, url_for

from domain import task_stats, task_verdict
from queries.compare import Comparison, SideRef, compare, compare_choices, find_side
from web.charts import funnel_chart, histogram_chart, pass_at_k_chart
from web.checklist import COMPARED_RUNS, reached
from web.database import request_session
from web.htmx import render
from web.limits import expensive
from web.params import given_args, optional_uuid, parse_uuid
from web.sides import requested_sides
from web.validation import Invalid

bp = Blueprint("compare", __name__)


def sides() -> tuple[SideRef, SideRef]:
    """The two sides the query string names (web.sides.requested_sides, as the API reads them): 400 when malformed,
    404 when unknown."""
    try:
        return requested_sides(request_session(), given_args())  # the picker sends an empty evaluator menu too
    except Invalid as error:
        abort(error.status, description=error.detail)


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


def pick():
    """/compare with no sides: the picker (environment, then each side's version, run or dataset run and evaluator),
    whose form submits the a/b URL; `environmentId` narrows the version and run menus, A defaults to the previous
    version. `with` (a run, from a run row's "compare" link) is B, and A the run before it of the same version (else the
    newest other run)."""
    environment_id = optional_uuid("environmentId")
    menus = compare_choices(request_session(), environment_id)
    versions = menus["version"]
    shown = environment_id or (versions[0].environment_id if versions else None)
    offered = [v for v in versions if v.environment_id == shown]
    default_b = offered[0].id if offered else None  # newest first
    default_a = offered[1].id if len(offered) > 1 else default_b
    runs = [r for r in menus["run"] if r.environment_id == shown]
    chosen = optional_uuid("with")
    if chosen is not None and chosen in {r.id for r in runs}:
        position = [r.id for r in runs].index(chosen)
        older = [r for r in runs[position + 1 :] if r.version_id == runs[position].version_id]
        default_b = chosen
        default_a = older[0].id if older else next((r.id for r in runs if r.id != chosen), chosen)
    return render(
        "compare/pick.html",
        menus=menus,
        environment_id=shown,
        defaults={"a": default_a, "b": default_b},
    )


@bp.get("/compare")
@expensive()
def show():
    """/compare?a=…&b=…: the two sides, each a run, an environment version (optionally one evaluator) or a dataset
    run; with no sides, the picker.

    The run list's and version list's checkboxes submit `id` twice; that answer redirects to the a/b URL.
    """
    picked = request.args.getlist("id")
    if not picked and "a" not in request.args and "b" not in request.args:
        return pick()
    if picked and "a" not in request.args:
        ids = [parse_uuid(value) for value in picked]
        if len(ids) != 2 or None in ids:
            abort(400, description="Tick exactly two runs (or two versions) to compare.")
        return redirect(url_for("compare.show", **dict(zip("ab", older_first(ids), strict=True))), 303)
    a, b = sides()
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
