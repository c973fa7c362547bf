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
    artifacts = largest.table("artifacts")
    bodies = largest.per_trial(largest.table("evaluation_trials").toast + artifacts.total)
    moved = largest.per_trial(artifacts.heap + artifacts.toast)
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
        f"each trial, {bodies:,.0f} bytes are bodies (the TOASTed steps and search vector of evaluation_trials and "
        f"the trajectory artifact) and {kept:,.0f} bytes are rows and indexes "
        f"({kept * 1e8 / GB:,.0f} GB at 100M). The plan:",
        "",
        "- **Partition evaluation_trials, trial_stages, rollouts and artifacts by month of creation** (range on "
        "the creation time, which the primary keys and the foreign keys between them then carry: a trial's stages, "
        "rollout and artifact share its month). Every list and export reads newest first and "
        "the aggregates read rollups, so a page touches one or two partitions; old months can be detached, moved "
        "to cheaper disks or dropped without a VACUUM of the rest. Organizations are not the key: one organization "
        "holds 70% of the rows here, and RLS already makes every index lead with organization_id.",
        "- **Trajectory artifact bodies move to object storage** (S3-compatible, content-addressed by the sha256 "
        f"already stored): the artifacts table keeps its metadata row, saving about {moved:,.0f} bytes a trial "
        f"({moved * 1e8 / GB:,.0f} GB at 100M). "
        "The export streams steps from evaluation_trials, so it does not read them.",
        "- **What stays in PostgreSQL**: the trial rows with their steps (search, snippets, the explorer and "
        "exports read them), the search vector and its GIN index, the rollups, stages and reviews. With lz4 "
        "TOAST compression (`default_toast_compression`, which the embedded build here lacks) the steps shrink "
        "further; the search vector does not compress and is the largest single column.",
        "",
    ]
