"""Full-text search benchmarks: the first page of /trials?q=… (matching trials and their snippets), per kind of
query, and how many trials each query matches."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from sqlalchemy import text

from bench.pages import Timing, login, measure
from queries.search import search_conditions

# label → (q, its p95 target in ms at the large size). The generator puts "denied" in one trial of 8, SKU numbers
# 7000-7099 in about 3% of trials, and plants the rare phrase in about 40 and SKU-7062 in about 200 trials of each
# growth step (bench/generate.py: plant_moduli), so both sizes have matches to list and highlight.
SEARCHES = {
    "rare phrase": ('"quota exceeded for warehouse"', 50.0),
    "common word": ("denied", 200.0),
    "identifier prefix": ("SKU-70*", 200.0),
    "identifier number": ("7062", 200.0),
}
RATIO_TARGET = 2.0  # each search at the large size costs at most this times its small-size cost


def url(q: str) -> str:
    return "/trials?" + urlencode({"q": q})


def measure_searches(app, email: str) -> dict[str, Timing]:
    """Server time of the first page of each search (list, snippets, rendering)."""
    client = app.test_client()
    login(client, email)
    return {label: measure(client, url(q)) for label, (q, _) in SEARCHES.items()}


def matching_trials(database, org_id: uuid.UUID) -> dict[str, int]:
    """How many of the organization's trials each search matches."""
    counts = {}
    with database.session(org_id) as session:
        for label, (q, _) in SEARCHES.items():
            where = search_conditions(q, "t")
            counts[label] = session.execute(
                text(f"SELECT count(*) FROM evaluation_trials t WHERE {where.sql}"), where.params
            ).scalar()
    return counts
