"""Accounts and login: organizations, users, memberships, the atomic login throttle, login sessions, members' roles.

The reads (an organization or account by name, the user behind a session or a token, the members) are in
queries/accounts.py; the rules a form checks too (password length, email shape, slugs) in domain/accounts.py.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import (
    func,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session
from werkzeug.security import generate_password_hash

from domain.accounts import EMAIL, MIN_PASSWORD_LENGTH, slugify, token_digest
from domain.rules import NAME, Refused
from domain.vocabulary import ROLES
from models.accounts import Membership, Organization, User
from models.base import new_id
from writes.tokens import revoke_member_tokens

# werkzeug's method for new password hashes: scrypt by default; the test suite sets a cheap pbkdf2 through
# AGENTFORGE_PASSWORD_METHOD so that hundreds of logins do not each cost a tenth of a second.
PASSWORD_METHOD = os.environ.get("AGENTFORGE_PASSWORD_METHOD", "scrypt")


def hash_password(password: str) -> str:
    """The stored form of a new password (werkzeug's `method$salt$key`)."""
    return generate_password_hash(password, method=PASSWORD_METHOD)


# Derived from when the email is unknown, so a miss costs the same time as a wrong password.
_DUMMY_METHOD_AND_SALT = hash_password("agentforge-timing-equaliser").rsplit("$", 1)[0]


class AccountError(ValueError):
    """A request to create or change an account that cannot be carried out (message says why)."""


def create_organization(session: Session, name: str) -> Organization:
    """Add an organization named `name` (domain.rules' NAME: held stripped); raise AccountError when the name breaks
    the rule or is taken."""
    try:
        name = NAME.apply(name)
    except Refused as refused:
        raise AccountError(f"organization name {refused.says}") from None
    if session.scalar(select(Organization.id).where(func.lower(Organization.name) == name.lower())):
        raise AccountError(f"organization {name!r} already exists")
    org = Organization(id=new_id(), name=name, slug=slugify(name))
    session.add(org)
    session.flush()
    return org


def create_user(session: Session, email: str, password: str, name: str = "") -> User:
    """Add a user with a hashed password; raise AccountError for a malformed or taken email or short password."""
    email = email.strip().lower()
    if not EMAIL.fullmatch(email):
        raise AccountError(f"{email!r} is not an email address")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"password must be at least {MIN_PASSWORD_LENGTH} characters")
    user = User(id=new_id(), email=email, password_hash=hash_password(password), name=name or email)
    # Through the definer function: the runtime role cannot see (or write) accounts outside its organization.
    created = session.scalar(
        text("SELECT create_account(:id, :email, :hash, :name)"),
        {"id": user.id, "email": user.email, "hash": user.password_hash, "name": user.name},
    )
    if not created:
        raise AccountError(f"a user with email {email!r} already exists")
    return user


def unproven_account_message(email: str) -> str:
    """Why an account made through an invitation link is not added to another organization by hand."""
    return (
        f"the account {email} was made through an invitation link and nobody has proven the address is theirs yet: "
        f"invite {email} instead, so that whoever holds the address accepts"
    )


def add_membership(session: Session, user: User, org: Organization, role: str) -> Membership:
    """Make `user` a member of `org` with `role` (the operator's tool: an owner role session scoped to `org`).

    An account made through an invitation link and not proven since is refused: whoever opened that link (perhaps
    the owner who made it) holds it, not necessarily the person the address belongs to.
    """
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if session.scalar(select(User.email_proven).where(User.id == user.id)) is False:
        raise AccountError(unproven_account_message(user.email))
    if session.scalar(select(Membership.id).where(Membership.organization_id == org.id, Membership.user_id == user.id)):
        raise AccountError(f"{user.email} is already a member of {org.name}")
    membership = Membership(organization_id=org.id, id=new_id(), user_id=user.id, role=role)
    session.add(membership)
    session.flush()
    return membership


def derive_key(method_and_salt: str, password: str) -> str:
    """The key werkzeug's generate_password_hash stores after `method$salt$` (scrypt or pbkdf2), for `password`."""
    method, salt = method_and_salt.split("$", 1)
    name, *args = method.split(":")
    if name == "scrypt":
        n, r, p = map(int, args) if args else (2**15, 8, 1)
        return hashlib.scrypt(password.encode(), salt=salt.encode(), n=n, r=r, p=p, maxmem=132 * n * r * p).hex()
    if name == "pbkdf2":
        hash_name, iterations = (args + ["sha256", "1000000"][len(args) :])[:2]
        return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt.encode(), int(iterations)).hex()
    raise ValueError(f"unknown password hash method {name!r}")


@dataclass(frozen=True)
class LoginAttempt:
    """A reserved slot to check one password (id), or how many seconds to wait when the throttle is full."""

    id: uuid.UUID | None
    retry_after: int


def reserve_login_attempt(session: Session, email: str, address: str | None) -> LoginAttempt:
    """Reserve the right to check one password for `email` from `address`, atomically, or say how long to wait.

    auth_login_begin() locks the account's and the address's throttle keys,
    counts failures in the window (5 per account, 30 per address, 15 minutes)
    plus attempts still being checked, and records this attempt when there is
    room. Commit before checking the password, so concurrent requests see it.
    """
    row = session.execute(
        text("SELECT attempt_id, retry_after FROM auth_login_begin(:email, :address)"),
        {"email": email, "address": address},
    ).one()
    return LoginAttempt(row.attempt_id, row.retry_after)


def log_in(
    session: Session, attempt: uuid.UUID, email: str, password: str, address: str | None, lifetime: timedelta
) -> tuple[uuid.UUID, str] | None:
    """Check the password of a reserved attempt in the database and open a login session: (user id, token), else None.

    The password hash never leaves PostgreSQL: the app gets the hash's method
    and salt, derives the key from the typed password and auth_login()
    compares it, counts a failure against the throttle or opens the session;
    without a live reservation nothing is checked. Unknown emails take as long
    as wrong passwords.
    """
    method_and_salt = session.scalar(text("SELECT auth_password_salt(:email)"), {"email": email})
    derived = derive_key(method_and_salt or _DUMMY_METHOD_AND_SALT, password)
    token = secrets.token_urlsafe(32)
    user_id = session.scalar(
        text("SELECT auth_login(:attempt, :email, :derived, :address, :digest, :lifetime)"),
        {
            "attempt": attempt,
            "email": email,
            "derived": derived,
            "address": address,
            "digest": token_digest(token),
            "lifetime": lifetime,
        },
    )
    return (user_id, token) if user_id else None


def close_auth_session(session: Session, token: str) -> None:
    """End the login session `token` belongs to; the cookie stops working everywhere."""
    session.execute(text("SELECT auth_close_session(:digest)"), {"digest": token_digest(token)})


def mark_organization_used(session: Session, user_id: uuid.UUID) -> None:
    """Remember the session's organization as the one `user_id` used last, so their next login lands there."""
    session.execute(update(Membership).where(Membership.user_id == user_id).values(last_used_at=func.now()))


def _membership(session: Session, membership_id: uuid.UUID) -> Membership:
    membership = session.scalar(select(Membership).where(Membership.id == membership_id))
    if membership is None:
        raise LookupError(f"no member {membership_id} in this organization")
    return membership


def _owners_left_after(session: Session, membership: Membership) -> int:
    """Owners the organization keeps if `membership` stops being one. The owner rows are locked until commit, so two
    owners demoting or removing each other at once cannot both pass: the second sees the first one's change."""
    owners = session.scalars(select(Membership.id).where(Membership.role == "owner").with_for_update()).all()
    return len(owners) - (1 if membership.id in owners else 0)


LAST_OWNER = "an organization needs at least one owner; make someone else owner first"
CONFIRM_SELF = "Tick the confirmation box: this changes your own access to the organization."


def change_role(
    session: Session,
    membership_id: uuid.UUID,
    role: str,
    *,
    acting_user_id: uuid.UUID | None = None,
    confirmed: bool = True,
) -> Membership:
    """Give a member another role; the organization always keeps at least one owner. Changing `acting_user_id`'s own
    role needs `confirmed`."""
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    membership = _membership(session, membership_id)
    if role != "owner" and _owners_left_after(session, membership) == 0:
        raise AccountError(LAST_OWNER)
    if membership.user_id == acting_user_id and role != membership.role and not confirmed:
        raise AccountError(CONFIRM_SELF)
    membership.role = role
    session.flush()
    return membership


def remove_member(
    session: Session, membership_id: uuid.UUID, *, acting_user_id: uuid.UUID | None = None, confirmed: bool = True
) -> None:
    """Remove a member (their account stays); never the last owner. Their tokens here and login sessions end for good.
    Removing `acting_user_id` themself needs `confirmed`.

    Tokens are revoked, not hidden, so re-adding the user never brings one back;
    their login sessions end (a session is not bound to one organization), so
    they log in again to reach their other organizations.
    """
    membership = _membership(session, membership_id)
    if _owners_left_after(session, membership) == 0:
        raise AccountError(LAST_OWNER)
    if membership.user_id == acting_user_id and not confirmed:
        raise AccountError(CONFIRM_SELF)
    user_id = membership.user_id
    session.delete(membership)
    session.flush()
    revoke_member_tokens(session, user_id)
    session.execute(text("SELECT auth_end_removed_sessions(:user)"), {"user": user_id})
