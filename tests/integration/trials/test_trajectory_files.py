"""A trial's trajectory file is rendered from the trial (migration 0037): the same bytes from the page and the API,
its recorded size and sha256, no body stored twice, and never a file that no longer matches what was recorded."""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import text

from tests.factories import finish_run, make_catalog, seed_org_rows
from tests.helpers import migrate


def trials_of(database, org_id):
    with database.session(org_id) as session:
        return session.execute(
            text("""SELECT t.id, t.trial_number, t.log_excerpt, t.steps, a.id AS artifact_id, a.filename, a.size,
                           a.sha256, a.body IS NULL AS rendered
                    FROM evaluation_trials t JOIN artifacts a ON a.id = t.trajectory_artifact_id
                    ORDER BY t.trial_number""")
        ).all()


def test_the_page_and_the_api_serve_the_recorded_bytes_of_a_file_stored_once(database, member, auth, client):
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=2)
    finish_run(database, catalog)
    auth.login(member.email)
    for trial in trials_of(database, member.org.id):
        assert trial.rendered and trial.artifact_id == trial.id  # no second copy of the steps: the trial's own file
        page = client.get(f"/trials/{trial.id}/trajectory.json")
        api = client.get(f"/api/v1/artifacts/{trial.artifact_id}")
        assert page.status_code == api.status_code == 200
        assert page.data == api.data
        assert len(page.data) == trial.size and hashlib.sha256(page.data).hexdigest() == trial.sha256
        assert api.headers["Content-Disposition"] == f"attachment; filename={trial.filename}"
        document = json.loads(page.data)
        assert document["schemaVersion"] == 1 and document["log"] == trial.log_excerpt
        assert json.loads(document["trajectory"]) == {"steps": trial.steps}


def test_a_file_stored_before_keeps_its_own_bytes(database, member, auth, client):
    """Trajectory files recorded before migration 0037 kept their bodies: those bytes are served as they are."""
    rows = seed_org_rows(database, member.org.id)
    auth.login(member.email)
    with database.session(member.org.id) as session:
        stored = session.execute(text("SELECT body FROM artifacts WHERE id = :id"), {"id": rows.artifact_id}).scalar()
    assert stored is not None
    assert client.get(f"/api/v1/artifacts/{rows.artifact_id}").data == bytes(stored)
    assert client.get(f"/trials/{rows.trial_id}/trajectory.json").data == bytes(stored)


@pytest.mark.fault
@pytest.mark.parametrize("column", ["steps", "log_excerpt"])
def test_a_trial_changed_by_hand_is_refused_rather_than_served_as_its_file(
    database, member, auth, client, owner_engine, column
):
    """Whoever edits a trial's steps or log in the database (the app never does) cannot pass the edit off as the
    recorded file: both downloads answer 409 and say why, and the other trials still download."""
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=2)
    finish_run(database, catalog)
    edited, untouched = trials_of(database, member.org.id)
    value = "'[]'::jsonb" if column == "steps" else "'rewritten log'"
    with owner_engine.begin() as connection:
        connection.execute(text("SELECT set_config('app.current_org', :org, true)"), {"org": str(member.org.id)})
        connection.execute(text(f"UPDATE evaluation_trials SET {column} = {value} WHERE id = :id"), {"id": edited.id})
    auth.login(member.email)
    page = client.get(f"/trials/{edited.id}/trajectory.json")
    assert page.status_code == 409
    assert "changed after it was recorded" in page.get_data(as_text=True)
    api = client.get(f"/api/v1/artifacts/{edited.artifact_id}")
    assert api.status_code == 409 and "changed after it was recorded" in api.get_json()["detail"]
    assert client.get(f"/trials/{untouched.id}/trajectory.json").status_code == 200


def test_a_trajectory_file_without_a_body_must_be_one(database, member, owner_engine):
    """Only a trial-{n}-trajectory.json may be stored without its bytes."""
    with owner_engine.begin() as connection, pytest.raises(Exception, match="ck_artifacts_body_or_rendered_trajectory"):
        connection.execute(text("SELECT set_config('app.current_org', :org, true)"), {"org": str(member.org.id)})
        connection.execute(
            text("""INSERT INTO artifacts (organization_id, id, filename, content_type, size, sha256)
                    VALUES (:org, uuidv7(), 'task.tar', 'application/x-tar', 0, '')"""),
            {"org": member.org.id},
        )


@pytest.mark.fault
def test_going_back_before_migration_0037_stores_every_rendered_file(database, database_urls, member, auth, client):
    """Downgrading stores each rendered file's bytes (what a download gave), so the older code finds them all."""
    catalog = make_catalog(database, member.org.id, {"kind": "scripted"}, attempt_count=2)
    finish_run(database, catalog)
    auth.login(member.email)
    downloaded = {t.id: client.get(f"/trials/{t.id}/trajectory.json").data for t in trials_of(database, member.org.id)}
    migrate(database_urls, database, "0036", downgrade=True)
    try:
        with database.session(member.org.id) as session:
            stored = {row.id: row.body for row in session.execute(text("SELECT id, body FROM artifacts"))}
    finally:
        migrate(database_urls, database, "head")
    assert {artifact_id: bytes(body) for artifact_id, body in stored.items()} == downloaded
    assert all(client.get(f"/trials/{t}/trajectory.json").data == body for t, body in downloaded.items())
