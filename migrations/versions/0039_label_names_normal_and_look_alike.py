"""Labels: names in their normal form, a key of what each looks like, and one label per normal form and per look.

A label's name is stored and shown in its normal form (domain.rules.normal_name: NFKC, no format characters,
case-folded), and `look_alike` holds domain.rules.look_alike of the name as written (UTS #39's confusable skeleton,
whatever the case); each is unique per organization, so `flaky`, `flaky` with a zero-width space and `fIaky` can no
longer be three labels. The unique index on lower(name) of migration 0032 gives way to the one on the normal form.

Existing labels that share a normal form or a look are merged, one organization at a time (the tables are FORCE'd
under RLS even for the owner): the oldest label of each group stays, renamed to its normal form, and takes the
others' trials (a trial that carried both keeps one), and their description when it had none; every trial that
carried a merged label gets an audit entry `label_merged` (before: the merged label's name, after: the name it
joined), with no actor. No trial label is lost. A name whose normal form is no valid label name (one that NFKC
turns longer than 64 characters, or gives a comma) keeps the name as written.

Downgrade drops the key and the indexes and puts back the index on lower(name); merged labels stay merged.

Revision ID: 0039
Revises: 0038
"""

from __future__ import annotations

import json
import re

import sqlalchemy as sa
from alembic import op
from uuid_utils.compat import uuid7

from domain.rules import look_alike, normal_name
from domain.triage import NAME_PATTERN

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None

_NAME = re.compile(NAME_PATTERN)


def _stored(written: str) -> str:
    normal = normal_name(written)
    return normal if _NAME.fullmatch(normal) else written


def _groups(labels: list) -> list[list]:
    """The labels (oldest first) grouped by shared normal form or look, each group oldest first."""
    group_of: dict[object, int] = {}
    parent = list(range(len(labels)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, label in enumerate(labels):
        for key in (("name", _stored(label.name)), ("look", look_alike(label.name))):
            if key in group_of:
                a, b = root(group_of[key]), root(i)
                parent[max(a, b)] = min(a, b)
            else:
                group_of[key] = i
    groups: dict[int, list] = {}
    for i, label in enumerate(labels):
        groups.setdefault(root(i), []).append(label)
    return list(groups.values())


def _merge(connection, org_id, kept, merged) -> None:
    """Move `merged`'s trials onto `kept`, audit each of them on its trial, and delete `merged`."""
    params = {"org": org_id, "kept": kept.id, "merged": merged.id}
    trials = (
        connection.execute(
            sa.text(
                "SELECT evaluation_trial_id FROM trial_labels WHERE label_id = :merged ORDER BY evaluation_trial_id"
            ),
            params,
        )
        .scalars()
        .all()
    )
    audit = [
        {
            "org": org_id,
            "id": uuid7(),
            "trial": trial_id,
            "before": json.dumps(merged.name),
            "after": json.dumps(_stored(kept.name)),
        }
        for trial_id in trials
    ]
    connection.execute(
        sa.text(
            """INSERT INTO trial_labels (organization_id, label_id, failed_rank, evaluation_trial_id,
                                         created_by_user_id, created_at)
               SELECT organization_id, :kept, failed_rank, evaluation_trial_id, created_by_user_id, created_at
               FROM trial_labels WHERE label_id = :merged
               ON CONFLICT DO NOTHING"""
        ),
        params,
    )
    if audit:
        connection.execute(
            sa.text(
                "INSERT INTO trial_audit (organization_id, id, evaluation_trial_id, actor_user_id, action, before, "
                "after) VALUES (:org, :id, :trial, NULL, 'label_merged', CAST(:before AS jsonb), "
                "CAST(:after AS jsonb))"
            ),
            audit,
        )
    connection.execute(
        sa.text(
            "UPDATE labels SET description = :description WHERE id = :kept AND description = '' AND :description <> ''"
        ),
        {**params, "description": merged.description},
    )
    connection.execute(sa.text("DELETE FROM labels WHERE id = :merged"), params)


def upgrade() -> None:
    """Add the key, merge look-alike labels (audited), store names in their normal form, index both."""
    op.execute("ALTER TABLE labels ADD COLUMN look_alike text")
    op.execute("DROP INDEX uq_labels_org_name")
    connection = op.get_bind()
    for org_id in connection.execute(sa.text("SELECT id FROM organizations ORDER BY id")).scalars().all():
        connection.execute(sa.text("SELECT set_config('app.current_org', :org, true)"), {"org": str(org_id)})
        labels = connection.execute(sa.text("SELECT id, name, description FROM labels ORDER BY created_at, id")).all()
        for kept, *merged in _groups(labels):
            for label in merged:
                _merge(connection, org_id, kept, label)
            connection.execute(
                sa.text("UPDATE labels SET name = :name, look_alike = :look WHERE id = :id"),
                {"name": _stored(kept.name), "look": look_alike(kept.name), "id": kept.id},
            )
    connection.execute(sa.text("SELECT set_config('app.current_org', '', true)"))
    op.execute("ALTER TABLE labels ALTER COLUMN look_alike SET NOT NULL")
    op.execute("CREATE UNIQUE INDEX uq_labels_org_name ON labels (organization_id, name)")
    op.execute("CREATE UNIQUE INDEX uq_labels_org_look_alike ON labels (organization_id, look_alike)")


def downgrade() -> None:
    """The key and its index gone, the index on lower(name) back; merged labels stay merged."""
    op.execute("DROP INDEX uq_labels_org_look_alike")
    op.execute("DROP INDEX uq_labels_org_name")
    op.execute("ALTER TABLE labels DROP COLUMN look_alike")
    op.execute("CREATE UNIQUE INDEX uq_labels_org_name ON labels (organization_id, lower(name))")
