"""The recording benchmark: the worker's statement and the bare INSERTs take turns trial by trial (so both meet the
same moments of the disk), and the schema it takes apart for the path as before search is whole again after."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import text

from bench import recording
from bench.generate import ORGS, ensure_catalog


@pytest.mark.slow
def test_the_worker_and_bare_paths_take_turns_and_the_schema_is_whole_after(database, monkeypatch):
    monkeypatch.setattr(recording, "TRIALS", 16)
    org_id, catalog = ensure_catalog(database, *ORGS[0])

    result = recording.measure_recording(database, org_id, catalog[0][0])

    assert result.worker_ms > 0 and result.bare_ms > 0 and result.worker_before_search_ms > 0
    assert result.worker_trials_per_s > 0
    with database.session(org_id) as session:
        # rollouts.seq is taken in commit order: the run of each trial, in the order the trials were written
        runs = session.execute(text("SELECT evaluation_run_id FROM rollouts ORDER BY seq")).scalars().all()
        indexes = set(
            session.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'evaluation_trials'")).scalars()
        )
        trigger = session.execute(
            text("SELECT tgenabled FROM pg_trigger WHERE tgname = :name"), {"name": recording.STAGES_TRIGGER}
        ).scalar_one()
    longest = current = 1
    for before, after in itertools.pairwise(runs):
        current = current + 1 if before != after else 1
        longest = max(longest, current)
    assert longest >= 2 * recording.TRIALS, "16 worker and 16 bare trials written alternately"
    assert set(recording.NEW_INDEXES) <= indexes
    assert trigger == "O"  # enabled again
