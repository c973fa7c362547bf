"""The first-run checklist's marks (checklist_marks, migration 0043) under the tenancy recipe, proven as the
runtime role: one organization's marks are invisible to another and cannot be written into it, a mark names a
member of its own organization only, only the table's own grants hold (no update or delete), and a removed member's
marks go with their membership."""

from __future__ import annotations

import psycopg.errors
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, ProgrammingError

from models import ChecklistMark
from tests.helpers import sqlstate
from writes.accounts import remove_member
from writes.checklist import leave_mark

pytestmark = pytest.mark.leak


@pytest.fixture
def two_members(database, make_member):
    """Ann of Org A and Bob of Org B, each with a mark."""
    ann, bob = make_member("ann@a.test", "Org A"), make_member("bob@b.test", "Org B")
    with database.session(ann.org.id, ann.user.id) as session, session.begin():
        leave_mark(session, ann.org.id, ann.user.id, "compared-runs")
    with database.session(bob.org.id, bob.user.id) as session, session.begin():
        leave_mark(session, bob.org.id, bob.user.id, "hidden")
    return ann, bob


def marks(database, org_id) -> list[tuple]:
    with database.session(org_id) as session:
        return [tuple(row) for row in session.execute(text("SELECT user_id, mark FROM checklist_marks"))]


def test_each_organization_reads_only_its_own_marks(database, two_members):
    ann, bob = two_members
    assert marks(database, ann.org.id) == [(ann.user.id, "compared-runs")]
    assert marks(database, bob.org.id) == [(bob.user.id, "hidden")]
    assert marks(database, None) == []


def test_a_mark_for_another_organization_is_refused_with_42501(database, two_members):
    ann, bob = two_members
    with database.session(ann.org.id) as session, pytest.raises(ProgrammingError) as raised:
        session.add(ChecklistMark(organization_id=bob.org.id, user_id=bob.user.id, mark="shown"))
        session.flush()
    assert isinstance(raised.value.orig, psycopg.errors.InsufficientPrivilege)
    assert marks(database, bob.org.id) == [(bob.user.id, "hidden")]


def test_a_mark_names_a_member_of_its_own_organization_only(database, two_members):
    ann, bob = two_members
    with database.session(ann.org.id) as session, pytest.raises(IntegrityError) as raised:
        leave_mark(session, ann.org.id, bob.user.id, "shown")  # Bob is no member of Org A
        session.flush()
    assert sqlstate(raised.value) == "23503"
    with database.session(ann.org.id) as session, pytest.raises(IntegrityError) as unknown:
        session.execute(text("INSERT INTO checklist_marks (organization_id, user_id, mark) VALUES (:o, :u, 'x')"),
                        {"o": ann.org.id, "u": ann.user.id})  # fmt: skip
    assert sqlstate(unknown.value) == "23514"  # not a mark of the vocabulary


def test_the_runtime_role_may_not_change_or_remove_a_mark(database, two_members):
    ann, _ = two_members
    for statement in ("UPDATE checklist_marks SET mark = 'hidden'", "DELETE FROM checklist_marks"):
        with database.session(ann.org.id) as session, pytest.raises(ProgrammingError) as raised:
            session.execute(text(statement))
        assert sqlstate(raised.value) == "42501"
    assert marks(database, ann.org.id) == [(ann.user.id, "compared-runs")]


def test_a_removed_members_marks_go_with_the_membership(database, two_members, make_member):
    ann, _ = two_members
    owner = make_member("olga@a.test", ann.org, "owner")
    with database.session(ann.org.id) as session, session.begin():
        membership = session.execute(
            text("SELECT id FROM memberships WHERE user_id = :u"), {"u": ann.user.id}
        ).scalar_one()
        remove_member(session, membership, acting_user_id=owner.user.id)
    assert marks(database, ann.org.id) == []
