"""Datasets at scale: a dataset version of 1,000 tasks run by 20 evaluators (checkpoints at steps 1,000 … 20,000),
8 attempts per task, beside the trials the bench database already holds; the server time of the dataset page, the
leaderboard API and a dataset run's page and API.

    python -m bench.datasets                  # on the bench database as `bench.generate` left it; rewrites its section
    python -m bench.datasets --sizes 10k,1M   # a fresh bench database grown to each size in turn
    python -m bench.datasets --beside-small   # the bench database as it is (10M grown before) beside a fresh 10k one

The dataset runs are queued through the app's own write (writes.dataset_runs.start_dataset_run: one evaluation run
and one rollup row per task), then finished in SQL the way the worker would leave them: every run completed, every
task's rollup row holding 8 trials drawn from the evaluator's skill and the task's difficulty (successes, scored
rewards and their squares, categories and stages). The pages read those rollup rows only, never trials, so the
160,000 trials they stand for are not generated; tests/integration/datasets/test_dataset_runs.py proves on real
worker runs that the rows equal the trials.
"""

from __future__ import annotations

import os
import time
import uuid

from sqlalchemy import select, text

from bench.generate import ORGS, bench_versions
from bench.pages import Timing, login, measure
from bench.sections import write_section
from db.session import Database
from domain.datasets import TaskInput
from domain.specs import draws_worlds
from models.datasets import Dataset
from queries.datasets import specs_of_versions
from queries.kept import forget_all
from writes.dataset_runs import start_dataset_run
from writes.datasets import add_dataset_version, create_dataset
from writes.environments import create_evaluator_config

os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")

TASKS = 1_000
EVALUATORS = 20
ATTEMPTS = 8
DATASET_NAME = f"bench-{TASKS}"
P95_TARGET_MS, RATIO_TARGET = 50.0, 1.5
TARGETED = ("/datasets/<id>", "/api/v1/datasets/<id>/leaderboard", "/dataset-runs/<id>")  # the three

# Every task's run completed and its rollup row filled: successes ~ Binomial(8, p) with p from the evaluator's skill
# (rising with its step) and the task's difficulty, rewards of the failures spread over (0, 1).
FINISH = text(
    """
    WITH drawn AS (
        SELECT t.organization_id, t.dataset_run_id, t.position, t.evaluation_run_id,
               least(0.98, greatest(0.02, :skill + 0.3 * sin(t.position))) AS p
        FROM dataset_run_tasks t WHERE t.organization_id = :org AND t.dataset_run_id = :dataset_run_id
    ), counted AS (
        SELECT d.*, (SELECT count(*) FROM generate_series(1, :attempts) g WHERE random() < d.p) AS wins
        FROM drawn d
    ), runs AS (
        UPDATE evaluation_runs r SET status = 'completed', attempts = 1, started_at = now() - interval '1 hour',
            finished_at = now() - interval '30 minutes'
        FROM counted c WHERE r.organization_id = c.organization_id AND r.id = c.evaluation_run_id
    )
    UPDATE dataset_run_tasks t SET trials = :attempts, successes = c.wins, scored = :attempts,
        reward_sum = c.wins + 0.4 * (:attempts - c.wins), reward_square_sum = c.wins + 0.16 * (:attempts - c.wins),
        tokens = 1200 * :attempts, task = 'Bench task ' || t.position,
        categories = CASE WHEN c.wins < :attempts THEN jsonb_build_object('wrong_item', :attempts - c.wins)
                          ELSE '{}' END,
        stages = jsonb_build_object(
            'stage_inventory', jsonb_build_array(:attempts, :attempts, :attempts),
            'stage_order', jsonb_build_array(:attempts, c.wins, c.wins + 0.4 * (:attempts - c.wins)))
    FROM counted c
    WHERE t.organization_id = c.organization_id AND t.dataset_run_id = c.dataset_run_id AND t.position = c.position
    """
)


def seed(database: Database) -> tuple[uuid.UUID, uuid.UUID, list[uuid.UUID]]:
    """The bench dataset of TASKS tasks and its EVALUATORS finished dataset runs (made once): (organization,
    dataset, dataset runs)."""
    every = bench_versions(database)
    org_id = every[0][0]
    with database.session(org_id) as session, session.begin():
        specs = specs_of_versions(session, {version_id for org, version_id, *_ in every if org == org_id})
        versions = sorted(version_id for version_id, spec in specs.items() if draws_worlds(spec))
        dataset = session.scalar(select(Dataset).where(Dataset.name == DATASET_NAME))
        if dataset is not None:
            runs = session.execute(
                text(
                    "SELECT dr.id FROM dataset_runs dr JOIN dataset_versions v "
                    "ON v.organization_id = dr.organization_id AND v.id = dr.dataset_version_id "
                    "WHERE v.dataset_id = :id ORDER BY dr.created_at"
                ),
                {"id": dataset.id},
            ).scalars()
            return org_id, dataset.id, list(runs)
        per_version = -(-TASKS // len(versions))
        tasks = [
            TaskInput(version_id, seed, "environmentVersionId", "worldSeeds")
            for version_id in versions
            for seed in range(1, per_version + 1)
        ][:TASKS]
        dataset = create_dataset(session, org_id, DATASET_NAME, "The dataset benchmark's tasks")
        version, _ = add_dataset_version(session, dataset, tasks)
        dataset_runs = []
        for n in range(1, EVALUATORS + 1):
            config = create_evaluator_config(
                session, org_id, f"bench-checkpoint-{n:02d}", {"kind": "scripted", "skill": 0.5}, ATTEMPTS
            )
            config.checkpoint, config.step = f"ckpt-{n * 1000}", n * 1000
            dataset_run, _ = start_dataset_run(session, version.id, config.id, ATTEMPTS)
            session.execute(
                FINISH,
                {"org": org_id, "dataset_run_id": dataset_run.id, "skill": 0.2 + 0.6 * n / EVALUATORS,
                 "attempts": ATTEMPTS},
            )  # fmt: skip
            dataset_runs.append(dataset_run.id)
        dataset_id = dataset.id
    return org_id, dataset_id, dataset_runs


def urls(database: Database, org_id: uuid.UUID, dataset_id: uuid.UUID, dataset_runs: list[uuid.UUID]) -> dict:
    """The measured endpoints: the dataset page (the leaderboard), its API, a dataset run's page and API."""
    middle = dataset_runs[len(dataset_runs) // 2]
    return {
        "/datasets/<id>": f"/datasets/{dataset_id}",
        "/api/v1/datasets/<id>/leaderboard": f"/api/v1/datasets/{dataset_id}/leaderboard",
        "/dataset-runs/<id>": f"/dataset-runs/{middle}",
        "/api/v1/dataset-runs/<id>": f"/api/v1/dataset-runs/{middle}",
    }


AFTER_A_TRIAL = " (after a trial of a dataset run)"
FIRST_READ = " (first read in a process)"
# What a trial of the measured dataset run does to its rollup, as RECORD_TRIAL leaves a task row: one task's
# tallies change (a success more, or one fewer once all succeeded, with its reward) and its revision goes up.
A_TRIAL = text(
    """
    UPDATE dataset_run_tasks
    SET successes = successes + d.step, reward_sum = reward_sum + 0.6 * d.step,
        reward_square_sum = reward_square_sum + 0.84 * d.step, revision = revision + 1
    FROM (SELECT CASE WHEN successes < trials THEN 1 ELSE -1 END AS step FROM dataset_run_tasks
          WHERE organization_id = :org AND dataset_run_id = :id AND position = :position) d
    WHERE organization_id = :org AND dataset_run_id = :id AND position = :position
    """
)


def a_trial_of(database: Database, org_id: uuid.UUID, dataset_run_id: uuid.UUID):
    """A function that records the effect of a trial on the next task of the dataset run (round the tasks)."""
    positions = iter(range(10**9))

    def record() -> None:
        with database.session(org_id) as session, session.begin():
            params = {"org": org_id, "id": dataset_run_id, "position": next(positions) % TASKS + 1}
            session.execute(A_TRIAL, params)

    return record


def measure_all(app, database: Database) -> tuple[int, dict[str, Timing]]:
    """(trials in the database, each endpoint's server time: repeated reads of one state; the targeted ones again
    after each trial of the measured dataset run (a new state each time, as while it is in progress), and as a
    process's first read of each state, nothing kept)."""
    org_id, dataset_id, dataset_runs = seed(database)
    with database.session(org_id) as session:
        trials = session.execute(text("SELECT coalesce(sum(trials), 0) FROM environment_version_stats")).scalar_one()
    client = app.test_client()
    login(client, ORGS[0][1])
    timings = {}
    for label, url in urls(database, org_id, dataset_id, dataset_runs).items():
        status = client.get(url).status_code
        if status != 200:
            raise SystemExit(f"{url} answered {status}")
        timings[label] = measure(client, url)
    middle = dataset_runs[len(dataset_runs) // 2]  # the dataset run urls() measures
    for label, url in urls(database, org_id, dataset_id, dataset_runs).items():
        if label in TARGETED:
            timings[label + AFTER_A_TRIAL] = measure(client, url, before=a_trial_of(database, org_id, middle))
    for label, url in urls(database, org_id, dataset_id, dataset_runs).items():
        if label in TARGETED:
            timings[label + FIRST_READ] = measure(client, url, before=forget_all)
    return int(trials), timings


def section(trials: int, timings: dict[str, Timing], started: float) -> list[str]:
    """BENCHMARKS.md's section of this measurement."""
    return [
        "## Datasets",
        "",
        f"`python -m bench.datasets` ({time.perf_counter() - started:.0f} s): a dataset version of {TASKS:,} tasks "
        f"run by {EVALUATORS} evaluators, {ATTEMPTS} attempts per task (their rollup rows; the worker's write path "
        f"queued the {TASKS * EVALUATORS:,} evaluation runs), in an organization of a database holding {trials:,} "
        "trials. "
        "Server time through Flask's test client, in milliseconds.",
        "",
        "| endpoint | median | p95 |",
        "|---|---:|---:|",
        *[f"| `{label}` | {t.median:.2f} | {t.p95:.2f} |" for label, t in timings.items()],
    ]


def target_rows(small: dict[str, Timing], large: dict[str, Timing]) -> list[str]:
    """The target's row: the dataset page's, the leaderboard API's and a dataset run page's p95 at the large size,
    read again and after a trial, and their ratio to the small size (the dataset run's API, which lists every task,
    and a process's first reads are measured beside them)."""
    measured = [label for label in large if label.removesuffix(AFTER_A_TRIAL) in TARGETED]
    worst = max(measured, key=lambda label: large[label].p95)
    steepest = max(measured, key=lambda label: large[label].p95 / small[label].p95)
    ratio = large[steepest].p95 / small[steepest].p95
    ok = large[worst].p95 <= P95_TARGET_MS and ratio <= RATIO_TARGET
    return [
        f"| a dataset of {TASKS:,} tasks, {ATTEMPTS} attempts each, {EVALUATORS} evaluators: the dataset page, the "
        f"leaderboard API and a dataset run's page p95 at most {P95_TARGET_MS:.0f} ms and at most "
        f"{RATIO_TARGET}x their small-size p95, a state read again and after each trial of a dataset run | worst "
        f"{large[worst].p95:.2f} ms (`{worst}`), {ratio:.2f}x "
        f"(`{steepest}`) | {'met' if ok else '**not met**'} |"
    ]


def size_section(measured: list[tuple[int, dict[str, Timing]]]) -> list[str]:
    """`make bench`'s section: each endpoint at each size of the database."""
    header = " | ".join(f"median at {trials:,} | p95 at {trials:,}" for trials, _ in measured)
    rows = []
    for label in measured[0][1]:
        cells = " | ".join(f"{t[label].median:.2f} | {t[label].p95:.2f}" for _, t in measured)
        rows.append(f"| `{label}` | {cells} |")
    return [
        "## Datasets",
        "",
        f"A dataset version of {TASKS:,} tasks run by {EVALUATORS} evaluators (checkpoints at steps 1,000 … "
        f"20,000), {ATTEMPTS} attempts per task, seeded by bench.datasets at the first size (the runs queued through "
        "the app's write, their rollup rows finished in SQL), in the measured organization (its trials at each size "
        "head the columns); server time in milliseconds.",
        "",
        f"| endpoint | {header} |",
        "|---|" + "---:|---:|" * len(measured),
        *rows,
    ]


SMALL_DATABASE = "agentforge_bench_small"


def beside_small(create_app) -> list[tuple[int, dict[str, Timing]]]:
    """The small size (a fresh database grown to 10k trials and seeded) and the bench database as it is, each
    VACUUM ANALYZEd and measured once to warm up, then measured one after the other; the small database dropped."""
    from bench import run

    large_name = os.environ["AGENTFORGE_DATABASE"]
    os.environ["AGENTFORGE_DATABASE"] = SMALL_DATABASE
    try:
        run.fresh_database()
        small_app = create_app()
        small = small_app.extensions["agentforge_db"]
        run.grow_to(small, run.SMALL)
    finally:
        os.environ["AGENTFORGE_DATABASE"] = large_name
    large_app = create_app()
    large = large_app.extensions["agentforge_db"]
    for app, database in ((small_app, small), (large_app, large)):
        run.vacuum_analyze(database)
        measure_all(app, database)  # seeds the small one; VACUUM ANALYZE again over its rows
        run.vacuum_analyze(database)
    measured = [measure_all(small_app, small), measure_all(large_app, large)]
    small.engine.dispose()
    from db.cluster import drop_embedded_database, start_embedded_cluster

    drop_embedded_database(start_embedded_cluster(small_app.config["AGENTFORGE_DATA_DIR"]), SMALL_DATABASE)
    return measured


def main() -> None:
    """Seed (once) and measure on the bench database as it is, or with `--sizes 10k,1M` on a fresh one grown to each
    size in turn (bench.run's growth, VACUUM ANALYZE before each measurement); rewrite the section of
    BENCHMARKS.md."""
    import argparse

    from app import create_app

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", help="grow a fresh bench database to each of these sizes (10k,1M) and measure")
    parser.add_argument(
        "--beside-small",
        action="store_true",
        help=f"measure the bench database as it is (a large size grown before) beside a fresh one of 10k trials "
        f"({SMALL_DATABASE}), one after the other in one run",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.beside_small:
        measured = beside_small(create_app)
        lines = [
            *size_section(measured),
            "",
            f"`python -m bench.datasets --beside-small` ({time.perf_counter() - started:.0f} s): the bench database as "
            f"`make bench SIZE=10M` or `--sizes` left it, beside a fresh one of {measured[0][0]:,} trials in the "
            "measured organization, each measured in turn in one run.",
            "",
            "| target | measured | |",
            "|---|---|---|",
            *target_rows(measured[0][1], measured[-1][1]),
        ]
    elif not args.sizes:
        app = create_app()
        trials, timings = measure_all(app, app.extensions["agentforge_db"])
        lines = section(trials, timings, started)
    else:
        from bench import run

        run.fresh_database()
        app = create_app()
        database = app.extensions["agentforge_db"]
        measured = []
        for size in args.sizes.split(","):
            run.grow_to(database, run.trials_of(size) if size.strip() != "10k" else run.SMALL)
            run.vacuum_analyze(database)
            measure_all(app, database)  # seeds at the first size; VACUUM ANALYZE again over its rows
            run.vacuum_analyze(database)
            measured.append(measure_all(app, database))
        small, large = measured[0][1], measured[-1][1]
        lines = [
            *size_section(measured),
            "",
            f"`python -m bench.datasets --sizes {args.sizes}` ({time.perf_counter() - started:.0f} s).",
            "",
            "| target | measured | |",
            "|---|---|---|",
            *target_rows(small, large),
        ]
    write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
