"""Secret `env` values of environment specs and agent configs: sealed at rest, shown as names only, digested.

An environment version's spec and an evaluator configuration's agent may carry
`"env": {"NAME": "value"}`; every value is a secret. What the database's jsonb
column keeps is the config with each value replaced by HIDDEN (`"***"`), so
every page, API response and export shows the names only, for every role. The
values themselves are sealed with AES-256-GCM into a separate `secret_env`
bytea column, bound to the row they belong to (table, organization, id as
associated data), so a sealed blob copied to another row does not open. The
worker opens them just before a trial and hands the trial the plaintext.

The key is 32 random bytes, URL-safe base64 (the form `Fernet.generate_key()`
prints): AGENTFORGE_SECRETS_KEY, or generated once into instance/secrets_key
(mode 0600). Every web and worker process must use the same key.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SECRETS_KEY_VARIABLE = "AGENTFORGE_SECRETS_KEY"
HIDDEN = "***"
SEALED_FORMAT = b"\x01"  # format byte, then 4 bytes of key id, 12 bytes of nonce, ciphertext with its tag
KEY_ID_BYTES, NONCE_BYTES = 4, 12
GENERATE_HINT = (
    'generate one with: python -c "import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())"'
)


class SecretsKeyError(RuntimeError):
    """The secrets key is missing, malformed, or not the key a stored secret was sealed with (message says which)."""


def _derive(raw: bytes, purpose: bytes) -> bytes:
    """A 32-byte subkey of the secrets key for one purpose (encryption, digests, key id)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"agentforge " + purpose).derive(raw)


@dataclass(frozen=True)
class SecretsKey:
    """The key that seals secret env values (AES-256-GCM) and keys their digests (HMAC-SHA256)."""

    raw: bytes = field(repr=False)

    @classmethod
    def from_text(cls, text: str, source: str = SECRETS_KEY_VARIABLE) -> SecretsKey:
        """Parse 32 bytes of URL-safe base64; SecretsKeyError naming `source` when it is anything else."""
        try:
            raw = base64.urlsafe_b64decode(text.strip().encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raw = b""
        if len(raw) != 32:
            raise SecretsKeyError(f"{source} must be 32 random bytes in URL-safe base64; {GENERATE_HINT}")
        return cls(raw)

    @staticmethod
    def generate() -> str:
        """A new key in its text form."""
        return base64.urlsafe_b64encode(os.urandom(32)).decode("ascii")

    @property
    def key_id(self) -> bytes:
        """Four bytes naming this key in every blob it seals (they reveal nothing of the key)."""
        return _derive(self.raw, b"key id")[:KEY_ID_BYTES]

    def seal(self, values: dict[str, Any], row: str) -> bytes:
        """Encrypt `values` (JSON) for the row named `row`."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        plaintext = json.dumps(values, sort_keys=True, ensure_ascii=False).encode()
        ciphertext = AESGCM(_derive(self.raw, b"seal")).encrypt(nonce, plaintext, row.encode())
        return SEALED_FORMAT + self.key_id + nonce + ciphertext

    def open(self, sealed: bytes, row: str) -> dict[str, Any]:
        """Decrypt what `seal` wrote for `row`; SecretsKeyError when this key did not seal it."""
        sealed = bytes(sealed)
        body = 1 + KEY_ID_BYTES + NONCE_BYTES
        key_id, nonce, ciphertext = sealed[1 : 1 + KEY_ID_BYTES], sealed[1 + KEY_ID_BYTES : body], sealed[body:]
        if sealed[:1] != SEALED_FORMAT or len(nonce) != NONCE_BYTES:
            raise SecretsKeyError(f"the secrets of {row} are not in a format this version reads")
        if key_id != self.key_id:
            raise SecretsKeyError(
                f"the secrets of {row} were sealed with secrets key {key_id.hex()}, but this process has key "
                f"{self.key_id.hex()}: give every web and worker process the same {SECRETS_KEY_VARIABLE}"
            )
        try:
            plaintext = AESGCM(_derive(self.raw, b"seal")).decrypt(nonce, ciphertext, row.encode())
        except InvalidTag as error:
            raise SecretsKeyError(f"the secrets of {row} do not open with this key (altered or moved)") from error
        opened: dict[str, Any] = json.loads(plaintext)
        return opened

    def digest(self, value: Any) -> str:
        """A keyed HMAC-SHA256 of one value: equal values, equal digests; no guess is testable without the key."""
        message = json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
        return "hmac-sha256:" + hmac.new(_derive(self.raw, b"digest"), message, hashlib.sha256).hexdigest()


def row_name(table: str, organization_id: uuid.UUID | str, row_id: uuid.UUID | str) -> str:
    """The associated data that binds a sealed blob to its row."""
    return f"{table}/{organization_id}/{row_id}"


def has_secrets(config: dict[str, Any]) -> bool:
    """Whether a spec or agent config names any env values."""
    return isinstance(config.get("env"), dict) and bool(config["env"])


def hide_env(config: dict[str, Any]) -> dict[str, Any]:
    """The config as everyone may see it: each env value replaced by HIDDEN, the names kept."""
    if not has_secrets(config):
        return config
    return {**config, "env": dict.fromkeys(config["env"], HIDDEN)}


def hidden_env_names(config: dict[str, Any]) -> list[str]:
    """Env names whose value is the "***" the dashboard shows instead of a secret (copied back by mistake)."""
    env = config.get("env")
    return sorted(name for name, value in env.items() if value == HIDDEN) if isinstance(env, dict) else []


def resubmitted_mask(where: str, names: list[str]) -> str:
    """Why a config whose env holds "***" is refused."""
    return (
        f"{where}.env {', '.join(names)}: {HIDDEN!r} stands for a secret that is never shown back; "
        "give the value itself (a changed secret is a new version or configuration)"
    )


def digest_env(config: dict[str, Any], key: SecretsKey | None) -> dict[str, Any]:
    """The config with each env value replaced by its keyed digest (what spec_sha256 covers)."""
    if not has_secrets(config):
        return config
    if key is None:
        raise SecretsKeyError(f"a secrets key is needed to store env values; set {SECRETS_KEY_VARIABLE}")
    return {**config, "env": {name: key.digest(value) for name, value in config["env"].items()}}


def seal_env(config: dict[str, Any], key: SecretsKey | None, row: str) -> tuple[dict[str, Any], bytes | None]:
    """Split a config into what the jsonb column keeps (names only) and the sealed values (None without env)."""
    if not has_secrets(config):
        return config, None
    if key is None:
        raise SecretsKeyError(f"a secrets key is needed to store env values; set {SECRETS_KEY_VARIABLE}")
    return hide_env(config), key.seal(config["env"], row)


def open_env(config: dict[str, Any], sealed: bytes | None, key: SecretsKey | None, row: str) -> dict[str, Any]:
    """The config with its env values back in plaintext, as the worker runs it."""
    if sealed is None:
        return config
    if key is None:
        raise SecretsKeyError(f"{row} has secrets but this process has no secrets key; set {SECRETS_KEY_VARIABLE}")
    return {**config, "env": key.open(sealed, row)}


def create_once(path: Path, generate: Callable[[], str]) -> str:
    """Return the text kept in `path`, writing `generate()` there first if it does not exist yet.

    Safe when several processes start together: each writes a complete private
    (0600) temporary file and links it into place; link fails when another
    process got there first, and everyone then reads the one file that won.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(generate())
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):  # another process won the race: read its key
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    return path.read_text().strip()


def load_secrets_key(configured: str | None, instance: Path) -> SecretsKey:
    """The configured key (AGENTFORGE_SECRETS_KEY), else the one generated once into instance/secrets_key."""
    if configured:
        return SecretsKey.from_text(configured)
    path = instance / "secrets_key"
    return SecretsKey.from_text(create_once(path, SecretsKey.generate), source=str(path))
