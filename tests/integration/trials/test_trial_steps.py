"""Trials keep their steps as rows the pages and exports read (evaluation_trials.steps), filled for older trials."""

from __future__ import annotations

from sqlalchemy import text

from tests.factories import finish_run, make_catalog
from tests.helpers import migrate, one, texts


def test_trials_written_before_the_steps_column_show_their_steps_after_the_migration(
    database, database_urls, client, auth, viewer
):
    catalog = make_catalog(database, viewer.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=2)
    finish_run(database, catalog)
    migrate(database_urls, database, "0016", downgrade=True)  # the columns go; the artifacts keep every step
    migrate(database_urls, database, "head")
    with database.session(viewer.org.id) as session:
        rows = session.execute(text("SELECT id, steps FROM evaluation_trials ORDER BY trial_number")).all()
    assert len(rows) == 2 and all(row.steps and row.steps[1]["command"].startswith("inspect") for row in rows)
    auth.login(viewer.email)
    steps = one(client.get(f"/trials/{rows[0].id}").get_data(as_text=True), "section.transcript")
    assert any(command.startswith('inspect {"seed":') for command in texts(steps, "pre.command"))
    assert "admin-console: 4 items" in steps.get_text()
