"""Storage per trial: the bytes of every table that grows with trials (heap, TOAST, indexes), divided by the trials,
and the 100M plan that follows from them."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from bench.bulk import owner_connection
from db.session import Database

# The tables that grow with trials; every other table grows with users, environments or evaluators.
TABLES = (
    "evaluation_trials",
    "artifacts",
    "trial_stages",
    "rollouts",
    "evaluation_runs",
    "trial_reviews",
    "trial_labels",
)
GB = 1e9


@dataclass(frozen=True)
class TableBytes:
    """One table's bytes: heap (main fork), TOAST (with its index), its own indexes."""

    table: str
    heap: int
    toast: int
    indexes: int

    @property
    def total(self) -> int:
        return self.heap + self.toast + self.indexes


@dataclass(frozen=True)
class Storage:
    """The bytes of the TABLES over `trials` trials (both organizations)."""

    trials: int
    tables: list[TableBytes]

    def per_trial(self, bytes_: int) -> float:
        return bytes_ / max(1, self.trials)

    @property
    def total(self) -> int:
        return sum(table.total for table in self.tables)

    def table(self, name: str) -> TableBytes:
        return next(table for table in self.tables if table.table == name)


def measure(database: Database, trials: int) -> Storage:
    """The sizes PostgreSQL reports for TABLES over the database's `trials` trials (as the owner: sizes are the whole
    database's, both organizations)."""
    with owner_connection(database) as conn:
        rows = conn.execute(
            text("""SELECT c.relname, pg_relation_size(c.oid),
                           coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0), pg_indexes_size(c.oid)
                    FROM pg_class c WHERE c.oid = ANY(CAST(:tables AS regclass[]))"""),
            {"tables": list(TABLES)},
        ).all()
    by_name = {name: TableBytes(name, heap, toast, indexes) for name, heap, toast, indexes in rows}
    return Storage(trials, [by_name[name] for name in TABLES])


def section(sizes: list[Storage]) -> list[str]:
    """The BENCHMARKS.md section: bytes per trial per table at each size, and the 100M plan with its figures."""
    header = " | ".join(f"heap / TOAST / indexes at {size.trials:,}" for size in sizes)
    rows = []
    for name in TABLES:
        cells = []
        for size in sizes:
            table = size.table(name)
            cells.append(
                f"{size.per_trial(table.heap):,.0f} / {size.per_trial(table.toast):,.0f} / "
                f"{size.per_trial(table.indexes):,.0f} = **{size.per_trial(table.total):,.0f}**"
            )
        rows.append(f"| `{name}` | " + " | ".join(cells) + " |")
    totals = " | ".join(f"**{size.per_trial(size.total):,.0f}** ({size.total / GB:.2f} GB)" for size in sizes)
    largest = sizes[-1]
    per_trial = largest.per_trial(largest.total)
    trials = largest.table("evaluation_trials")
    bodies = largest.per_trial(trials.toast)
    files = largest.per_trial(largest.table("artifacts").total)
    kept = per_trial - bodies
    return [
        "## Storage per trial",
        "",
        "Bytes per trial of every table that grows with trials (`pg_relation_size` of the heap, the TOAST table "
        "with its index, `pg_indexes_size`), divided by the trials (both organizations), after VACUUM (ANALYZE).",
        "",
        f"| table | {header} |",
        "|---|" + "---:|" * len(sizes),
        *rows,
        f"| all | {totals} |",
        "",
        "### 100M trials",
        "",
        f"At the measured {per_trial:,.0f} bytes a trial, 100M trials take {per_trial * 1e8 / GB:,.0f} GB. Of "
        f"each trial, {bodies:,.0f} bytes are bodies (the TOASTed steps and search vector of evaluation_trials) "
        f"and {kept:,.0f} bytes are rows and indexes ({kept * 1e8 / GB:,.0f} GB at 100M). The plan:",
        "",
        "- **Partition evaluation_trials, trial_stages, rollouts and artifacts by month of creation** (range on "
        "the creation time, which the primary keys and the foreign keys between them then carry: a trial's stages, "
        "rollout and artifact share its month). Every list and export reads newest first and "
        "the aggregates read rollups, so a page touches one or two partitions; old months can be detached, moved "
        "to cheaper disks or dropped without a VACUUM of the rest. Organizations are not the key: one organization "
        "holds 70% of the rows here, and RLS already makes every index lead with organization_id.",
        "- **Trajectory files are not stored twice** (done: migration 0037). A `trial-{n}-trajectory.json` is "
        "rendered from its trial's log and steps and checked against its recorded sha256; the artifacts table "
        f"keeps a metadata row of {files:,.0f} bytes a trial. What is stored as it came (imported ATIF documents, "
        "task bundles) moves to object storage (S3-compatible, content-addressed by the sha256 already stored).",
        "- **The steps of closed months move to object storage**: one compressed file of a month's steps per "
        "organization, read by the trial page and the export of that month, the search vector and its GIN index "
        "staying in PostgreSQL so search still finds those trials (snippets then read the month's file). That "
        "takes the steps' share of the TOAST bodies out of PostgreSQL for all but the open months.",
        "- **What stays in PostgreSQL**: the trial rows, the open months' steps, the search vector and its GIN "
        "index, the rollups, stages and reviews. With lz4 TOAST compression (`default_toast_compression`, which "
        "the embedded build here lacks) the steps shrink further; the search vector does not compress and is the "
        "largest single column.",
        "",
    ]
