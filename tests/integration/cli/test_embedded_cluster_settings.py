"""The embedded cluster is sized to the machine it runs on, not left at PostgreSQL's defaults."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import psycopg
import pytest

from db.cluster import SETTINGS_FILE, machine_settings
from db.urls import libpq_url
from tests.paths import ROOT


def test_the_embedded_cluster_is_sized_to_this_machine(database_urls):
    """A quarter of the memory as shared_buffers, not 128 MB, and the planner told that the disk is an SSD with the
    memory as its cache: the settings file is written before the cluster starts and included by its conf."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("DATABASE_URL is set: an external server's settings are its operator's")
    expected = machine_settings(psutil.virtual_memory().total)
    with psycopg.connect(libpq_url(database_urls.runtime)) as conn:
        shown = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in expected}  # type: ignore[index]
    assert shown == expected
    data_dir = Path(os.environ.get("AGENTFORGE_TEST_DATA_DIR", ROOT / "instance" / "pgdata-test"))
    assert f"include_if_exists = '{SETTINGS_FILE}'" in (data_dir / "postgresql.conf").read_text()


@pytest.mark.parametrize(
    ("memory_gib", "shared_buffers", "effective_cache_size"),
    [(0.25, "128MB", "512MB"), (2, "512MB", "1536MB"), (24, "6144MB", "18432MB"), (256, "8192MB", "196608MB")],
)
def test_settings_follow_the_memory_within_bounds(memory_gib, shared_buffers, effective_cache_size):
    settings = machine_settings(int(memory_gib * 2**30))
    assert settings == {
        "shared_buffers": shared_buffers,
        "effective_cache_size": effective_cache_size,
        "random_page_cost": "1.1",
    }
