"""Accounts' rules: the shortest password, what an email address looks like, an organization's slug, and the one
form a secret token is stored in (a login session's, an API token's, an invitation link's: its sha256)."""

from __future__ import annotations

import hashlib
import re

MIN_PASSWORD_LENGTH = 8
EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


def slugify(name: str) -> str:
    """Return a URL-safe slug for an organization name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "org"


def token_digest(token: str) -> bytes:
    """The sha256 the database keeps instead of a secret token (login session, API token, invitation link)."""
    return hashlib.sha256(token.encode()).digest()
