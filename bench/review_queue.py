"""The review queue at scale: a decision and the next trial on screen, server time through Flask's test client.

    python -m bench.review_queue              # on the bench database as it is; rewrites its section of BENCHMARKS.md
    python -m bench.review_queue --print     # the same, printed only

A member of the measured organization starts a queue over its unreviewed failures (POST /queue, the explorer's
button), then makes REQUESTS decisions (after WARM_UPS) through the queue's own request: htmx's POST of the decision
panel, whose answer is the next trial's panel, transcript and stages. Each is timed from the request to the
answer's last byte. The decisions cycle through what a reviewer does: reviewed; reviewed with a label; excluded
with a reason; reviewed with a category of the organization's list. Then every decision is undone (`u`, timed the
same way: an undo and the restored trial), so the bench database's triage is left as it was; the queue and its
claims are deleted (the audit trail keeps the entries, as it keeps every change).
"""

from __future__ import annotations

import argparse
import os
import re
import time
import uuid
from typing import Any

from sqlalchemy import text

from bench.generate import ORGS, bench_versions
from bench.pages import REQUESTS, Timing, csrf_token_of, login, percentile_timing
from bench.sections import write_section
from bench.triage import seed_triage
from db.session import Database
from domain.review_queue import UNDO_MOST

os.environ.setdefault("AGENTFORGE_DATABASE", "agentforge_bench")

QUEUE = "reviewState=unreviewed&rewardBand=failed"
WARM_UPS = 5
P95_TARGET_MS, TARGET_TRIALS = 150.0, 1_000_000
HTMX = {"HX-Request": "true"}
ACTION = re.compile(r'<form method="post" action="(/queue/[0-9a-f-]+/trials/[0-9a-f-]+)" id="decision"')


def _values(page: str, name: str, *, checked: bool = False) -> list[str]:
    """The values of the page's inputs named `name` (only the ticked ones with `checked`)."""
    found = []
    for tag in re.findall(rf'<input[^>]*name="{name}"[^>]*>', page):
        if checked and " checked" not in tag:
            continue
        value = re.search(r'value="([^"]*)"', tag)
        found.append(value.group(1) if value else "")
    return found


def decision(page: str, token: str, number: int) -> tuple[str, dict[str, Any]]:
    """(URL, form) of the `number`th decision on the trial `page` shows, as its panel would post it."""
    found = ACTION.search(page)
    if found is None:
        raise SystemExit("the queue's answer holds no decision form")
    shown = _values(page, "shown_category")[0]
    form: dict[str, Any] = {
        "csrf_token": token,
        "decision": "reviewed",
        "shown_label_id": _values(page, "shown_label_id"),
        "label_id": _values(page, "label_id", checked=True),
        "shown_category": shown,
        "human_category": shown,
        "reason": "",
    }
    kind = number % 4
    labels = _values(page, "label_id")
    if kind == 1 and labels:  # the first label's key: put it on (or take it off)
        first = labels[0]
        form["label_id"] = [i for i in form["label_id"] if i != first] or [first]
    elif kind == 2:
        form["decision"], form["reason"] = "excluded", "bench: the verifier crashed"
    elif kind == 3:
        options = re.findall(r'<option value="([A-Za-z0-9_.-]+)"', page.split('id="human_category"', 1)[1])
        other = [option for option in options if option != shown]
        if other:
            form["human_category"] = other[0]
    return found.group(1), form


def timed(client, url: str, form: dict[str, Any]) -> tuple[float, str]:
    """(milliseconds, body) of one htmx POST; SystemExit unless it answers 200."""
    started = time.perf_counter()
    response = client.post(url, data=form, headers=HTMX)
    body = response.get_data(as_text=True)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}: {body[:300]}")
    return elapsed, body


def measure(app, database: Database) -> tuple[int, dict[str, Timing]]:
    """(trials of the measured organization, the server time of a decision and of an undo, each with the trial it
    shows next)."""
    org_id = bench_versions(database)[0][0]
    with database.session(org_id) as session:
        trials = session.execute(text("SELECT coalesce(sum(trials), 0) FROM environment_version_stats")).scalar_one()
        labelled = session.execute(text("SELECT count(*) FROM labels")).scalar_one()
    if not labelled:
        seed_triage(database, [org_id])  # bench.run's labels and reviews, when bench.generate alone made the database
    decisions = WARM_UPS + REQUESTS
    if decisions > UNDO_MOST:
        raise SystemExit(f"BENCH_REQUESTS + {WARM_UPS} decisions is more than a queue can undo ({UNDO_MOST})")
    client = app.test_client()
    login(client, ORGS[0][1])
    token = csrf_token_of(client.get("/trials?" + QUEUE).text)
    started = client.post(f"/queue?{QUEUE}", data={"csrf_token": token})
    if started.status_code != 303:
        raise SystemExit(f"POST /queue answered {started.status_code}")
    location = started.headers["Location"]
    queue_id = uuid.UUID(location.split("/")[2])
    page = client.get(location).get_data(as_text=True)
    decided, undone = [], []
    try:
        for number in range(decisions):
            url, form = decision(page, token, number)
            elapsed, page = timed(client, url, form)
            if number >= WARM_UPS:
                decided.append(elapsed)
        for number in range(decisions):
            elapsed, page = timed(client, f"/queue/{queue_id}/undo", {"csrf_token": token, "position": "1"})
            if number >= WARM_UPS:
                undone.append(elapsed)
    finally:
        with database.session(org_id) as session, session.begin():
            user = session.execute(text("SELECT user_id FROM review_queues WHERE id = :id"), {"id": queue_id})
            session.execute(text("DELETE FROM review_claims WHERE user_id = :user"), {"user": user.scalar()})
            session.execute(text("DELETE FROM review_queues WHERE id = :id"), {"id": queue_id})
    return int(trials), {
        "a decision and the next trial (POST /queue/<id>/trials/<id>, htmx)": percentile_timing(decided),
        "an undo and the restored trial (POST /queue/<id>/undo, htmx)": percentile_timing(undone),
    }


def target_rows(trials: int, timings: dict[str, Timing]) -> list[str]:
    """The target's row: a decision and the next trial, p95 at TARGET_TRIALS trials or more."""
    decision_p95 = next(iter(timings.values())).p95
    if trials >= TARGET_TRIALS:
        verdict = "met" if decision_p95 <= P95_TARGET_MS else "**not met**"
    else:
        verdict = f"not measured at {TARGET_TRIALS:,} trials (this organization holds {trials:,})"
    return [
        f"| review queue: a decision and the next trial on screen, p95 at most {P95_TARGET_MS:.0f} ms at "
        f"{TARGET_TRIALS:,} trials | {decision_p95:.2f} ms at {trials:,} trials | {verdict} |"
    ]


def section(trials: int, timings: dict[str, Timing], took: float | None = None) -> list[str]:
    """BENCHMARKS.md's section of this measurement (`took`: its seconds, when run alone)."""
    command = "`python -m bench.review_queue`" + (f" ({took:.0f} s)" if took is not None else "")
    return [
        "## Review queue",
        "",
        f"{command}: a member's queue over the unreviewed failures of an "
        f"organization holding {trials:,} trials; {REQUESTS} decisions after {WARM_UPS} warm-ups "
        "(reviewed; with a label; excluded with a reason; with a category of the list), each answered with the next "
        "trial's panel, transcript and stages, then every decision undone. Server time through Flask's test client, "
        "in milliseconds.",
        "",
        "| request | median | p95 |",
        "|---|---:|---:|",
        *[f"| {label} | {t.median:.2f} | {t.p95:.2f} |" for label, t in timings.items()],
        "",
        "| target | measured | |",
        "|---|---|---|",
        *target_rows(trials, timings),
        "",
    ]


def main() -> None:
    """Measure on the bench database as it is; rewrite the section of BENCHMARKS.md (or print it, `--print`)."""
    from app import create_app

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--print", action="store_true", help="print the section without rewriting BENCHMARKS.md")
    args = parser.parse_args()
    began = time.perf_counter()
    app = create_app()
    trials, timings = measure(app, app.extensions["agentforge_db"])
    lines = section(trials, timings, time.perf_counter() - began)
    if not args.print:
        write_section(lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
