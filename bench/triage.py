"""Triage at bench scale: labels and review states on a share of the generated trials, so the explorer's label and
reviewState filters (and the unreviewed failures view) are measured at 10k and 1M trials like every other filter.

Per organization: `flaky-verifier` on one failed trial in 50, `wrong-customer` on one trial in 2,000 (a rare
label), one trial in 20 reviewed and one in 1,000 excluded. Chosen by the trial id's hash, so growing the database
labels the new trials at the same rates; re-running adds nothing twice.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text

from db.session import Database
from domain.rules import look_alike, normal_name

LABELS = (("flaky-verifier", "red", 50, "t.reward < 1"), ("wrong-customer", "orange", 2000, "TRUE"))
REVIEWED_EVERY, EXCLUDED_EVERY = 20, 1000
SHARE = "abs(hashtextextended(t.id::text, 0)) % {every} = 0"


def seed_triage(database: Database, org_ids: list[uuid.UUID]) -> None:
    """Add the labels, trial labels and reviews (see the module) to every organization's trials."""
    for org_id in org_ids:
        with database.session(org_id) as session, session.begin():
            for name, color, every, where in LABELS:
                session.execute(
                    text(
                        "INSERT INTO labels (organization_id, id, name, look_alike, color) "
                        "VALUES (:org, :id, :name, :look, :color) ON CONFLICT DO NOTHING"
                    ),
                    {
                        "org": org_id,
                        "id": uuid.uuid4(),
                        "name": normal_name(name),
                        "look": look_alike(name),
                        "color": color,
                    },
                )
                session.execute(
                    text(
                        f"""INSERT INTO trial_labels (organization_id, label_id, failed_rank, evaluation_trial_id)
                        SELECT t.organization_id, (SELECT id FROM labels WHERE name = :name),
                               trial_failed_rank(t.reward), t.id
                        FROM evaluation_trials t WHERE {where} AND {SHARE.format(every=every)}
                        ON CONFLICT DO NOTHING"""
                    ),
                    {"name": name},
                )
            for state, every in (("reviewed", REVIEWED_EVERY), ("excluded", EXCLUDED_EVERY)):
                session.execute(
                    text(
                        f"""INSERT INTO trial_reviews (organization_id, evaluation_trial_id, review_state, reason,
                                                       failed_rank, verifier_category)
                        SELECT t.organization_id, t.id, :state, :reason, trial_failed_rank(t.reward),
                               t.failure_category
                        FROM evaluation_trials t WHERE {SHARE.format(every=every)}
                        ON CONFLICT DO NOTHING"""
                    ),
                    {"state": state, "reason": "bench" if state == "excluded" else ""},
                )
            # as writes.triage marks the trials it changes (exports read triage for these only)
            shares = " OR ".join(
                f"({where} AND {SHARE.format(every=every)})" for _, _, every, where in LABELS
            ) + "".join(f" OR {SHARE.format(every=every)}" for every in (REVIEWED_EVERY, EXCLUDED_EVERY))
            session.execute(text(f"UPDATE evaluation_trials t SET triaged = true WHERE NOT t.triaged AND ({shares})"))


TRIAGE_QUERIES = {
    "label=flaky-verifier": "label=flaky-verifier",
    "label=wrong-customer (a rare label)": "label=wrong-customer",
    "reviewState=excluded": "reviewState=excluded",
    "reviewState=reviewed&status=failed": "reviewState=reviewed&status=failed",
    "reviewState=unreviewed&rewardBand=failed (unreviewed failures)": "reviewState=unreviewed&rewardBand=failed",
}
