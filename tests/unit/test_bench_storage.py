"""The storage section of BENCHMARKS.md: bytes per trial per table at each size, and the 100M figures from them."""

from __future__ import annotations

from bench.storage import TABLES, Storage, TableBytes, section


def storage(trials: int, scale: int) -> Storage:
    sizes = {"evaluation_trials": (900, 3000, 1000), "artifacts": (190, 0, 60), "trial_stages": (230, 0, 270)}
    return Storage(
        trials,
        [TableBytes(name, *(value * trials * scale for value in sizes.get(name, (0, 0, 0)))) for name in TABLES],
    )


def test_each_table_has_its_bytes_per_trial_at_each_size():
    lines = section([storage(10_000, 1), storage(1_000_000, 2)])
    trials_row = next(line for line in lines if line.startswith("| `evaluation_trials` |"))
    assert trials_row == "| `evaluation_trials` | 900 / 3,000 / 1,000 = **4,900** | 1,800 / 6,000 / 2,000 = **9,800** |"
    assert "| all | **5,650** (0.06 GB) | **11,300** (11.30 GB) |" in lines


def test_the_100m_plan_uses_the_largest_size():
    text = "\n".join(section([storage(10_000, 1), storage(1_000_000, 1)]))
    assert "At the measured 5,650 bytes a trial, 100M trials take 565 GB." in text
    assert "3,000 bytes are bodies" in text and "2,650 bytes are rows and indexes (265 GB at 100M)" in text
    assert "keeps a metadata row of 250 bytes a trial" in text
