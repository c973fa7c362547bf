"""Synthetic evaluation history for benchmarks: organizations, 20 environment versions, N trials with rollouts.

    python -m bench.generate --trials 1000000      # add a million trials to the app's database
    python -m bench.generate --check               # prove the rollups equal the raw trials

Rows are generated inside PostgreSQL (INSERT … SELECT over generate_series)
as the owner role, one organization at a time with app.current_org set, so
RLS WITH CHECK still holds; PostgreSQL refuses COPY FROM on tables with
row-level security, and generating server-side avoids shipping the rows at
all. Rollups are then added from the generated trials exactly as the worker
would have added them one trial at a time. Ids are time-ordered UUIDs (PostgreSQL's
uuidv7()), as the app's own (models.base.new_id): each insert lands at the right
edge of its unique indexes instead of on a random page of them, which at 5M trials
made a growth step 1.5 times as fast.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

from sqlalchemy import text

from app import create_app
from bench.bulk import bulk_load
from db.session import Database
from domain.scoring import pass_at_k_table
from models.accounts import Organization
from queries.accounts import find_organization
from writes.accounts import add_membership, create_organization, create_user
from writes.environments import create_environment, create_environment_version, create_evaluator_config
from writes.runs import version_stats_upsert

os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")

BENCH_PASSWORD = "bench-password"
ORGS = (("Bench Org 1", "bench1@agentforge.test", 14), ("Bench Org 2", "bench2@agentforge.test", 6))
ATTEMPTS = 8
CHUNK_RUNS = 12_500  # 100k trials per transaction
ENVIRONMENTS = {
    "admin-console": (
        ("stage_inventory", "stage_order", "stage_checkout"),
        ("wrong_item", "wrong_quantity", "gave_up", "tool_error", "out_of_steps", "timeout"),
    ),
    "support-desk": (
        ("stage_triage", "stage_routing", "stage_reply"),
        ("wrong_team", "wrong_priority", "missing_reference", "gave_up", "out_of_steps", "agent_error"),
    ),
}


def version_spec(name: str, index: int) -> dict:
    """A distinct, valid spec per version index."""
    params = {"skus": 3 + index % 18} if name == "admin-console" else {"tickets": 2 + index % 29}
    return {"kind": "builtin", "environment": name, "params": params}


def ensure_members(database: Database, org_id: uuid.UUID, emails: list[str]) -> None:
    """Make each of `emails` a member of the organization (the load benchmark's clients), once."""
    with database.admin_session(org_id) as session, session.begin():
        org = session.get(Organization, org_id)
        if org is None:
            raise LookupError(f"no organization {org_id}")
        for email in emails:
            if not session.execute(text("SELECT 1 FROM users WHERE email = :e"), {"e": email}).first():
                add_membership(session, create_user(session, email, BENCH_PASSWORD), org, "member")


def ensure_catalog(database: Database, org_name: str, email: str, versions: int) -> tuple[uuid.UUID, list]:
    """The organization with its user, `versions` environment versions (both environments) and an evaluator."""
    with database.admin_session() as session, session.begin():
        org = find_organization(session, org_name) or create_organization(session, org_name)
    with database.admin_session(org.id) as session, session.begin():
        if not session.execute(text("SELECT 1 FROM users WHERE email = :e"), {"e": email}).first():
            add_membership(session, create_user(session, email, BENCH_PASSWORD), org, "owner")
        existing = session.execute(
            text(
                "SELECT v.id, e.name, (SELECT id FROM evaluator_configs WHERE name = 'bench-scripted') "
                "FROM environment_versions v JOIN environments e ON e.id = v.environment_id ORDER BY v.created_at"
            )
        ).all()
        if existing:
            return org.id, [tuple(row) for row in existing]
        config = create_evaluator_config(
            session, org.id, "bench-scripted", {"kind": "scripted", "skill": 0.6}, ATTEMPTS
        )
        environments = {name: create_environment(session, org.id, name, f"{name} (benchmark)") for name in ENVIRONMENTS}
        catalog = []
        for index in range(versions):
            name = list(ENVIRONMENTS)[index % 2]
            version = create_environment_version(session, environments[name], version_spec(name, index))
            catalog.append((version.id, name, config.id))
        return org.id, catalog


PASS_AT_K_VALUES = ", ".join(
    f"({c}, CAST('{json.dumps(pass_at_k_table(ATTEMPTS, c))}' AS jsonb))" for c in range(ATTEMPTS + 1)
)
# Distinct trial contents per environment in a growth step (at most): steps, task, log, search vector and
# trajectory artifact are computed once per content, then shared by the trials that draw it (see contents).
CONTENTS = 65_536
# Each growth step plants the rare phrase in about RARE trials and SKU-7062 as the main SKU in about SKU trials,
# whatever its size, as a search benchmark needs (a rare term compared at two sizes must match at both).
RARE, SKU_PLANTED = 40, 200
CONTENTS_TABLE = "bench_trial_contents"
CONTENT = f"JOIN {CONTENTS_TABLE} c ON c.environment = :env AND c.kind = g.kind AND c.slot = g.slot"
FILLED_TABLES = ("evaluation_trials", "artifacts", "rollouts", "trial_stages", "evaluation_runs")
BULK_TRIALS = 200_000
STREAMS = 2  # versions generated at a time (one per core)


@contextmanager
def contents(database: Database, growth_trials: int) -> Iterator[None]:
    """Compute the trial contents of a growth step of `growth_trials` trials into CONTENTS_TABLE, and drop them after.

    Per environment: min(CONTENTS, growth_trials) plain contents, RARE with the rare phrase, SKU_PLANTED with SKU-7062,
    each from its own random seed. The search vector is the production function's (trial_search_vector), and so are
    the size and sha256 of the trajectory file (trial_trajectory_document, which renders the file from its trial:
    its body is not stored, as record_trial stores none); computing them per content rather than per trial is what
    makes generation fast (the vector alone costs ~0.2 ms a trial). The table holds no organization's
    data (no organization_id): it is the owner's scratch table, gone when the step ends.
    """
    kinds = (
        ("plain", plain_contents(growth_trials), False, False),
        ("rare", RARE, True, False),
        ("sku", SKU_PLANTED, False, True),
    )

    def compute(env_name: str) -> None:
        selects = [
            f"""SELECT '{kind}' AS kind, n - 1 AS slot, seed, {STEPS} AS steps, {TASK} AS task,
                       'opened {env_name} (world ' || seed || E')\\nstep budget 12, used 5' AS log
                FROM (SELECT n, (random() * 2147483647)::int AS seed, {str(rare).upper()} AS rare,
                             {str(sku).upper()} AS sku FROM generate_series(1, {count}) n) g"""
            for kind, count, rare, sku in kinds
        ]
        with database.admin_session() as session, session.begin():
            session.execute(
                text(f"""
                INSERT INTO {CONTENTS_TABLE}
                SELECT '{env_name}', c.kind, c.slot, c.seed, c.steps, c.task, c.log,
                       trial_search_vector(c.task, c.log, c.steps), octet_length(b.body), encode(sha256(b.body), 'hex')
                FROM ({" UNION ALL ".join(selects)}) c
                CROSS JOIN LATERAL (SELECT trial_trajectory_document(c.log, c.steps) AS body) b""")
            )

    with database.admin_session() as session, session.begin():
        session.execute(text(f"DROP TABLE IF EXISTS {CONTENTS_TABLE}"))
        session.execute(
            text(f"""CREATE UNLOGGED TABLE {CONTENTS_TABLE} (environment text, kind text, slot int, seed int,
                     steps jsonb, task text, log text, search_vector tsvector, size int, sha256 text,
                     PRIMARY KEY (environment, kind, slot))""")
        )
    with ThreadPoolExecutor(STREAMS) as streams:
        list(streams.map(compute, ENVIRONMENTS))
    with database.admin_session() as session, session.begin():
        session.execute(text(f"ANALYZE {CONTENTS_TABLE}"))
    try:
        yield
    finally:
        with database.admin_session() as session, session.begin():
            session.execute(text(f"DROP TABLE IF EXISTS {CONTENTS_TABLE}"))


def plain_contents(growth_trials: int) -> int:
    """How many plain contents a growth step of `growth_trials` trials computes per environment."""
    return max(1, min(CONTENTS, growth_trials))


def draw(growth_trials: int) -> dict[str, float | int]:
    """The bound parameters by which each trial draws its content: the chance of a rare and of a SKU-7062 content
    (about RARE and SKU_PLANTED trials in the step, fewer in a small step), and the number of each kind."""
    growth = max(1, growth_trials)
    return {  # never more often than one trial in 250 and one in 50
        "rare_p": min(1 / 250, RARE / growth),
        "sku_p": min(1 / 50, SKU_PLANTED / growth),
        "plain": plain_contents(growth),
        "rare_n": RARE,
        "sku_n": SKU_PLANTED,
    }


def generate_runs(
    database: Database, org_id: uuid.UUID, version_id, env_name: str, config_id, runs: int, growth_trials: int
) -> None:
    """Insert `runs` completed runs of ATTEMPTS trials each, with artifacts, rollouts and rollups, in chunks.

    Call it inside `contents(database, growth_trials)`, where `growth_trials` is how many trials this growth step
    adds over every version: each trial draws its steps, task, log, search vector and artifact from those contents."""
    stages, categories = ENVIRONMENTS[env_name]
    stage_array = "ARRAY[" + ", ".join(f"'{s}'" for s in stages) + "]"
    category_array = "ARRAY[" + ", ".join(f"'{c}'" for c in categories) + "]"
    done = 0
    while done < runs:
        chunk = min(CHUNK_RUNS, runs - done)
        with database.admin_session(org_id) as session, session.begin():
            params = {"org": org_id, "version": version_id, "config": config_id, "runs": chunk, "env": env_name}
            params |= draw(growth_trials)
            session.execute(
                text("""
                CREATE TEMP TABLE gen_runs ON COMMIT DROP AS
                SELECT uuidv7() AS id, now() - ((:runs - n) || ' seconds')::interval AS created_at
                FROM generate_series(1, :runs) n"""),
                params,
            )
            session.execute(
                text(f"""
                CREATE TEMP TABLE gen_trials ON COMMIT DROP AS
                SELECT g.*, c.seed,
                       CASE WHEN g.reward < 1 THEN ({category_array})[1 + abs(c.seed) % {len(categories)}] END
                       AS failure_category
                FROM (SELECT *, round(((stage_values[1] + stage_values[2] + stage_values[3]) / 3)::numeric, 6)::float8
                      AS reward FROM (SELECT run_id, id, trial_number, created_at,
                             CASE WHEN d < :rare_p THEN 'rare' WHEN d < :rare_p + :sku_p THEN 'sku' ELSE 'plain' END
                             AS kind,
                             CASE WHEN d < :rare_p THEN floor(random() * :rare_n)
                                  WHEN d < :rare_p + :sku_p THEN floor(random() * :sku_n)
                                  ELSE floor(random() * :plain) END::int AS slot,
                             CASE WHEN u < 0.45 THEN ARRAY[1, 1, 1]::float8[]
                                  WHEN u < 0.8 THEN ARRAY[1, CASE WHEN v < 0.5 THEN 0.5 ELSE 0 END, 0]::float8[]
                                  ELSE ARRAY[0, 0, 0]::float8[] END AS stage_values
                      FROM (SELECT r.id AS run_id, uuidv7() AS id,
                                   t AS trial_number, random() AS d, random() AS u, random() AS v, r.created_at
                            FROM gen_runs r CROSS JOIN generate_series(1, {ATTEMPTS}) t) r) d) g
                {CONTENT}"""),
                params,
            )
            session.execute(
                text("""
                INSERT INTO evaluation_runs (organization_id, id, environment_version_id, evaluator_config_id,
                    attempt_count, reset_mode, status, attempts, world_seed, base_seed, created_at, started_at,
                    finished_at)
                SELECT :org, id, :version, :config, 8, 'initial', 'completed', 1, 0, 0, created_at, created_at,
                       created_at FROM gen_runs ORDER BY created_at, id"""),  # the trigger numbers them oldest first
                params,
            )
            session.execute(
                text(f"""
                INSERT INTO artifacts (organization_id, id, filename, content_type, size, sha256, created_at)
                SELECT :org, g.id, 'trial-' || g.trial_number || '-trajectory.json', 'application/json',
                       c.size, c.sha256, g.created_at FROM gen_trials g {CONTENT}"""),
                params,
            )
            session.execute(
                text(f"""
                INSERT INTO evaluation_trials (organization_id, id, evaluation_run_id, environment_version_id,
                    trial_number, seed, status, reward, failure_category, metrics, trajectory_artifact_id,
                    log_excerpt, task, started_at, finished_at, steps, tools, search_vector)
                SELECT :org, g.id, g.run_id, :version, g.trial_number, g.seed,
                       CASE WHEN g.reward = 1 THEN 'succeeded' ELSE 'failed' END, g.reward, g.failure_category,
                       (SELECT jsonb_object_agg(k, v) FROM unnest({stage_array}, g.stage_values) AS s(k, v)),
                       g.id, c.log, c.task, g.created_at, g.created_at, c.steps, '{TOOLS}'::jsonb,
                       c.search_vector
                FROM gen_trials g {CONTENT}"""),
                params,
            )
            session.execute(
                text("""
                INSERT INTO rollouts (organization_id, id, environment_version_id, evaluation_run_id,
                                      evaluation_trial_id, seed, reward, created_at)
                SELECT :org, uuidv7(), :version, run_id, id, seed, reward, created_at
                FROM gen_trials ORDER BY created_at, trial_number"""),
                params,
            )
            session.execute(
                text(f"""
                UPDATE evaluation_runs er SET pass_at_k = p.pass_at_k, mean_reward = s.mean_reward
                FROM (SELECT run_id, count(*) FILTER (WHERE reward = 1) AS c,
                             round(avg(reward)::numeric, 6)::float8 AS mean_reward FROM gen_trials GROUP BY 1) s
                JOIN (VALUES {PASS_AT_K_VALUES}) AS p(c, pass_at_k) ON p.c = s.c
                WHERE er.organization_id = :org AND er.id = s.run_id"""),
                params,
            )
            add_rollups(session, params, stage_array)
        done += chunk


def bench_versions(database: Database) -> list[tuple]:
    """(organization, version, environment, evaluator) of every version of the ORGS, their catalogs made if missing."""
    catalogs = [ensure_catalog(database, name, email, versions) for name, email, versions in ORGS]
    return [(org, *entry) for org, catalog in catalogs for entry in catalog]


def generate(database: Database, versions: list[tuple], runs_per_version: int, bulk: bool | None = None) -> int:
    """Add `runs_per_version` runs to every (organization, version, environment, evaluator) of `versions` as one
    growth step, STREAMS versions at a time; return the number of trials added.

    A `bulk` step (by default one of at least BULK_TRIALS trials) drops the secondary indexes of the tables it fills
    and builds them again at the end (bench.bulk): far cheaper than maintaining them row by row."""
    growth = runs_per_version * ATTEMPTS * len(versions)
    if not growth:
        return 0
    if bulk is None:
        bulk = growth >= BULK_TRIALS
    loading = bulk_load(database, FILLED_TABLES) if bulk else nullcontext()
    with contents(database, growth), loading, ThreadPoolExecutor(STREAMS) as streams:
        list(streams.map(lambda v: generate_runs(database, v[0], v[1], v[2], v[3], runs_per_version, growth), versions))
    return growth


def _sql_step(number: int, tool: str, arguments: str, observation: str) -> str:
    """SQL building one structured step (domain.trajectory's record) of an agent's tool call, from `seed`."""
    command = f"'{tool}'" if arguments == "'{}'" else f"'{tool} ' || {arguments}"
    call = f"'call_{number}'"
    return f"""jsonb_build_object('step', {number}, 'tool', '{tool}', 'command', {command},
        'observation', {observation}, 'source', 'agent',
        'toolCalls', jsonb_build_array(jsonb_build_object('id', {call}, 'name', '{tool}',
                                                          'arguments', ({arguments})::jsonb)),
        'results', jsonb_build_array(jsonb_build_object('callId', {call}, 'content', {observation})))"""


def _sql_message_step(number: int, message: str) -> str:
    """SQL building the agent's closing words (a step with no tool), as domain.trajectory.message_step does."""
    return f"""jsonb_build_object('step', {number}, 'tool', NULL, 'command', '', 'observation', '',
        'source', 'agent', 'message', {message})"""


# Realistic text for search: tool names, JSON arguments, multi-line observations of a few hundred characters.
# Each content's SKUs, order and ledger line come from its seed: one SKU number in 10,000; "permission denied" in one
# content of 8 and "timed out" in one of 10 (common words). The `rare` contents hold the phrase "quota exceeded for
# warehouse" and the `sku` ones have SKU-7062 as their main SKU (an identifier a researcher looks up); trials draw
# them at the rates of `draw`, so every growth step adds about RARE and SKU_PLANTED of them whatever its size.
SKU = "'SKU-' || lpad(((seed / {0}) % 10000)::text, 4, '0')"
SKU_A = f"(CASE WHEN sku THEN 'SKU-7062' ELSE {SKU.format(1)} END)"
SKU_B, SKU_C = SKU.format(7), SKU.format(131)
ORDER = "'ORD-' || lpad((seed % 100000)::text, 5, '0')"
INVENTORY = f"""{SKU_A} || ' widget-' || (seed % 89) || '  shelf A' || (seed % 12) || '  qty=' || (seed % 13) || E'\\n'
    || {SKU_B} || '  gadget-' || (seed % 53) || '  shelf B' || (seed % 7) || '  qty=0 (backordered since '
    || (1 + seed % 28) || ' Nov)' || E'\\n' || {SKU_C} || '  bracket-' || (seed % 31) || '  shelf C2  qty='
    || (seed % 40) || E'\\n3 items listed, 1 below the reorder point of 5 units; warehouse east-' || (seed % 4)"""
ORDERS_FILE = "'{\"path\": \"/srv/warehouse/orders-' || (seed % 31) || '.csv\"}'"
ORDERS = f"""E'order_id,sku,quantity,status,updated_at\\n' || {ORDER} || ',' || {SKU_A} || ',' || (1 + seed % 9)
    || ',pending,2026-11-' || lpad((1 + seed % 28)::text, 2, '0') || E'T09:14:00Z\\n' || 'ORD-'
    || lpad(((seed / 3) % 100000)::text, 5, '0') || ',' || {SKU_B} || ',2,shipped,2026-10-30T17:02:11Z'
    || E'\\nORD-' || lpad(((seed / 11) % 100000)::text, 5, '0') || ',' || {SKU_C} || ',' || (seed % 5)
    || ',cancelled,2026-10-12T08:45:37Z'"""
GREP = f"""'{{"command": "grep -n ' || {SKU_A} || ' /srv/warehouse/ledger.log | tail -n 20"}}'"""
LEDGER = f"""CASE WHEN seed % 8 = 1
        THEN 'grep: /srv/warehouse/ledger.log: Permission denied'
             || E'\\nexit status 2 (the agent user cannot read the ledger)'
        WHEN seed % 10 = 3
        THEN E'command timed out after 30 seconds\\npartial output: ' || {SKU_A} || ' reserved 2 units'
        ELSE (seed % 997) || ': ' || {SKU_A} || ' received ' || (seed % 40) || E' units from supplier acme-parts\\n'
             || (seed % 991) || ': ' || {SKU_A} || ' reserved ' || (1 + seed % 9) || ' units for ' || {ORDER}
             || E'\\n' || (seed % 983) || ': nightly reconciliation ok, checksum ' || md5(seed::text) END"""
RESTOCK = f"""'{{"sku": "' || {SKU_A} || '", "quantity": ' || (5 + seed % 20) || '}}'"""
RESTOCKED = f"""CASE WHEN rare
        THEN 'error: quota exceeded for warehouse east-' || (seed % 4) || ' while restocking ' || {SKU_A}
        ELSE 'restocked ' || {SKU_A} || ': ' || (seed % 13) || ' -> ' || (seed % 13 + 5 + seed % 20) || ' units' END"""
CLOSING = f"""CASE WHEN seed % 8 = 1
        THEN 'I could not finish: the ledger is not readable (permission denied), so ' || {ORDER} || ' stays pending.'
        ELSE 'I restocked ' || {SKU_A} || ' and placed ' || {ORDER} || '; the order is pending confirmation.' END"""

STEPS = "jsonb_build_array({})".format(
    ", ".join(
        [
            _sql_step(1, "list_inventory", "'{}'", INVENTORY),
            _sql_step(2, "read_file", ORDERS_FILE, ORDERS),
            _sql_step(3, "run_shell", GREP, LEDGER),
            _sql_step(4, "restock_item", RESTOCK, RESTOCKED),
            _sql_message_step(5, CLOSING),
        ]
    )
)
TASK = f"""'Restock ' || {SKU_A} || ' to at least ' || (5 + seed % 20) || ' units and confirm order ' || {ORDER}
    || ' in the admin console.'"""
TOOLS = json.dumps(
    [
        {"name": name, "description": description, "inputSchema": {"type": "object", "properties": properties}}
        for name, description, properties in (
            ("list_inventory", "List the items with their shelves and quantities.", {}),
            ("read_file", "Read a file of the warehouse share.", {"path": {"type": "string"}}),
            ("run_shell", "Run a shell command in the workspace.", {"command": {"type": "string"}}),
            (
                "restock_item",
                "Set the quantity of an item.",
                {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
            ),
        )
    ]
)


def add_rollups(session, params: dict, stage_array: str) -> None:
    """Add the stats, failure_category and stage_* rollups of the chunk's runs and trials (gen_runs, gen_trials) to
    the version's, as the worker would have one trial at a time (the stats through the worker's own statement);
    check_rollups compares them with the raw trials."""
    session.execute(
        text(
            version_stats_upsert("""
            SELECT CAST(:org AS uuid), CAST(:version AS uuid), 1, 0, 0, NULL::float8 FROM gen_runs
            UNION ALL SELECT CAST(:org AS uuid), CAST(:version AS uuid), 0, 1, 1, reward FROM gen_trials""")
        ),
        params,
    )
    session.execute(
        text("""
        INSERT INTO failure_category_counts (organization_id, environment_version_id, failure_category, trials)
        SELECT :org, :version, failure_category, count(*) FROM gen_trials
        WHERE failure_category IS NOT NULL GROUP BY failure_category
        ON CONFLICT (organization_id, environment_version_id, failure_category)
        DO UPDATE SET trials = failure_category_counts.trials + EXCLUDED.trials"""),
        params,
    )
    session.execute(
        text(f"""
        INSERT INTO stage_metric_rollups (organization_id, environment_version_id, stage_key, trials, passed,
                                          value_sum)
        SELECT :org, :version, s.k, count(*), count(*) FILTER (WHERE s.v = 1), sum(s.v)
        FROM gen_trials g CROSS JOIN LATERAL unnest({stage_array}, g.stage_values) AS s(k, v) GROUP BY s.k
        ON CONFLICT (organization_id, environment_version_id, stage_key) DO UPDATE SET
            trials = stage_metric_rollups.trials + EXCLUDED.trials,
            passed = stage_metric_rollups.passed + EXCLUDED.passed,
            value_sum = stage_metric_rollups.value_sum + EXCLUDED.value_sum"""),
        params,
    )


ROLLUP_CHECKS = {
    "environment_version_stats": """
        SELECT v.id,
               (SELECT count(*) FROM evaluation_runs er WHERE er.environment_version_id = v.id),
               (SELECT count(*) FROM evaluation_trials t JOIN evaluation_runs er
                  ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
                WHERE er.environment_version_id = v.id),
               count(r.id), count(r.reward), count(*) FILTER (WHERE r.reward = 1),
               count(*) FILTER (WHERE r.reward = 0), round(coalesce(sum(r.reward), 0)::numeric, 4),
               min(r.reward), max(r.reward)
        FROM environment_versions v LEFT JOIN rollouts r ON r.environment_version_id = v.id
        GROUP BY v.id HAVING count(r.id) > 0
        EXCEPT SELECT environment_version_id, runs, trials, rollouts, scored, successes, zero_rewards,
               round(reward_sum::numeric, 4), min_reward, max_reward FROM environment_version_stats""",
    "failure_category_counts": """
        SELECT er.environment_version_id, t.failure_category, count(*) FROM evaluation_trials t
        JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
        WHERE t.failure_category IS NOT NULL GROUP BY 1, 2
        EXCEPT SELECT environment_version_id, failure_category, trials FROM failure_category_counts""",
    "stage_metric_rollups": """
        SELECT er.environment_version_id, m.key, count(*), count(*) FILTER (WHERE m.value::float8 = 1),
               round(sum(m.value::float8)::numeric, 6)
        FROM evaluation_trials t
        JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
        CROSS JOIN LATERAL jsonb_each_text(t.metrics) m WHERE m.key LIKE 'stage\\_%' GROUP BY 1, 2
        EXCEPT SELECT environment_version_id, stage_key, trials, passed, round(value_sum::numeric, 6)
        FROM stage_metric_rollups""",
    "evaluator_category_counts": """
        SELECT er.environment_version_id, er.evaluator_config_id, coalesce(t.failure_category, ''), count(*)
        FROM evaluation_trials t
        JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
        GROUP BY 1, 2, 3
        EXCEPT SELECT environment_version_id, evaluator_config_id, failure_category, trials
        FROM evaluator_category_counts""",
    "evaluator_stage_rollups": """
        SELECT er.environment_version_id, er.evaluator_config_id, m.key, count(*),
               count(*) FILTER (WHERE m.value::float8 = 1), round(sum(m.value::float8)::numeric, 6)
        FROM evaluation_trials t
        JOIN evaluation_runs er ON er.organization_id = t.organization_id AND er.id = t.evaluation_run_id
        CROSS JOIN LATERAL jsonb_each_text(t.metrics) m WHERE m.key LIKE 'stage\\_%' GROUP BY 1, 2, 3
        EXCEPT SELECT environment_version_id, evaluator_config_id, stage_key, trials, passed,
               round(value_sum::numeric, 6) FROM evaluator_stage_rollups""",
}


def check_rollups(database: Database) -> list[str]:
    """Return the organizations and rollup tables whose rows differ from an aggregate over the raw trials."""
    problems = []
    with database.admin_session() as session:
        orgs = session.execute(text("SELECT id, name FROM organizations ORDER BY name")).all()
    for org_id, name in orgs:
        with database.admin_session(org_id) as session:
            for table, sql in ROLLUP_CHECKS.items():
                differing = session.execute(text(f"SELECT count(*) FROM ({sql}) d")).scalar()
                if differing:
                    problems.append(f"{name}: {differing} {table} rows differ from the trials")
    return problems


def main() -> None:
    """Generate `--trials` trials (or check the rollups) in the app's configured database."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=1_000_000, help="trials to add (rounded to runs of 8)")
    parser.add_argument("--check", action="store_true", help="only check that the rollups equal the trials")
    args = parser.parse_args()
    app = create_app()
    database: Database = app.extensions["agentforge_db"]
    if args.check:
        problems = check_rollups(database)
        print("\n".join(problems) or "rollups equal the raw trials in every organization")
        raise SystemExit(1 if problems else 0)
    started = time.perf_counter()
    versions = bench_versions(database)
    runs_per_version = max(1, args.trials // ATTEMPTS // len(versions))
    total = generate(database, versions, runs_per_version)
    elapsed = time.perf_counter() - started
    print(
        f"added {total:,} trials ({runs_per_version * len(versions):,} runs, {len(versions)} environment versions, "
        f"{len(ORGS)} organizations) in {elapsed:.1f} s: {total / elapsed:,.0f} trials/s"
    )


if __name__ == "__main__":
    main()
