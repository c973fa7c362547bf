"""BENCHMARKS.md's plans: the statement each page is about, from a real request, under EXPLAIN ANALYZE."""

from __future__ import annotations

import re

import pytest

from bench import pages, plans
from bench.generate import ORGS, ensure_catalog, generate


def test_each_page_shows_the_plan_of_its_own_statement(app, database, monkeypatch):
    org_id, catalog = ensure_catalog(database, *ORGS[0])
    generate(database, [(org_id, *entry) for entry in catalog[:2]], runs_per_version=12)
    # The rare phrase may match none of 192 trials (and then no snippet is parsed): the common word stands in.
    explained = dict(plans.EXPLAINED)
    explained["common word"] = explained.pop("rare phrase")
    monkeypatch.setattr(plans, "EXPLAINED", explained)

    lines = plans.section(app, database, org_id, ORGS[0][1], pages.sample_ids(database, org_id), 192)

    assert lines[0] == "## Plans at 192 trials"
    headings = [line for line in lines if line.startswith("### ")]
    assert headings == [f"### `{label}`" for label in explained]
    blocks = "\n".join(lines).split("```")[1::2]
    assert len(blocks) == 2
    stage, search = (block.strip("\n").splitlines() for block in blocks)
    assert any("on trial_stages ts" in line for line in stage), "the stage filter's ids statement"
    assert any("to_tsvector" in line and "~~ ALL" in line for line in search), "the snippets' statement"
    for plan in (stage, search):
        assert plan[-1].startswith("Execution Time: ") and "(actual time=" in plan[0]
    said = re.compile(r"id = ANY \('\{…\d+ ids…\}'::uuid\[\]\)")
    assert any(said.search(line) for line in search), "the page's ids said as how many"


def test_an_array_of_ids_is_said_as_its_length_and_nothing_else_changes():
    ids = ",".join(f"01a23769-3a15-7af1-85c2-7950a52f32{n:02d}" for n in range(3))
    line = (
        f"Index Cond: ((organization_id = '01a23769-3a15-7af1-85c2-7950a52f3200'::uuid) AND (id = ANY ('{{{ids}}}')))"
    )
    assert plans.shortened(line) == (
        "Index Cond: ((organization_id = '01a23769-3a15-7af1-85c2-7950a52f3200'::uuid) AND (id = ANY ('{…3 ids…}')))"
    )


def test_a_page_without_the_statement_is_an_error_not_an_empty_plan(app, database, auth):
    ensure_catalog(database, *ORGS[0])
    client = app.test_client()
    pages.login(client, ORGS[0][1])
    with pytest.raises(RuntimeError, match=r"none of its .* statements holds 'FROM no_such_table'"):
        plans.slowest_statement(client, "/trials", "FROM no_such_table")
