"""Where AgentForge's files are: the folders that ship with the code (the dashboard's templates/ and static/,
alembic's migrations/) and the instance folder, which is the operator's (the secret keys, the embedded cluster's
data and passwords, serving-url).

Run from a checkout, they are the checkout's templates/, static/, migrations/ and instance/. Installed from the
wheel, the code is in site-packages and the three shipped folders are in agentforge_resources/ beside it
(pyproject.toml maps them there), while the instance folder, never in site-packages, is instance/ of the current
directory. AGENTFORGE_INSTANCE_DIR names the instance folder in either case.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]  # the checkout, or site-packages when installed from the wheel
RESOURCES = TOP / "agentforge_resources"  # the wheel's templates/, static/ and migrations/
INSTALLED = RESOURCES.is_dir()  # a checkout has no such folder, an editable install neither (its code is the checkout)


def shipped_folder(name: str) -> Path:
    """The folder `name` (templates, static or migrations) of the checkout, or of the wheel when installed."""
    return (RESOURCES if INSTALLED else TOP) / name


def instance_folder(environ: Mapping[str, str] | None = None) -> Path:
    """The instance folder: AGENTFORGE_INSTANCE_DIR when set, else instance/ of the checkout, or of the current
    directory when installed from the wheel."""
    named = (os.environ if environ is None else environ).get("AGENTFORGE_INSTANCE_DIR", "").strip()
    if named:
        return Path(named).expanduser().resolve()
    return (Path.cwd() if INSTALLED else TOP) / "instance"
