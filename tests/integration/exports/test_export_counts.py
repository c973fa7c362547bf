"""True counts: the export page's numbers are what each download holds, after a reviewer excluded trials and with
includeExcluded; excluded-and-included lines say why and who; TRL rows need a turn of the agent's own.

Each test reads the page as a user does (its table, its links, the words beside them), downloads every link it
shows and counts the lines.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from atif import Trajectory
from bs4 import Tag
from sqlalchemy import text

from domain.outcome import TrialOutcome
from queries.training_formats import CLOSING_TURN
from tests.conftest import ApiClient
from tests.factories import make_catalog, record_rewards, writable_copy
from tests.helpers import attr, one, parse
from tests.integration.exports.test_training_rows import assert_message_shape, render_everywhere
from tests.integration.exports.test_training_rows import outcome as training_outcome
from tests.paths import TESTS

STEPS = [
    {"step": 1, "tool": "list_inventory", "command": "list_inventory", "observation": "SKU-1042  stock=3"},
    {"step": 2, "tool": "restock", "command": 'restock {"sku": "SKU-1042", "quantity": 4}', "observation": "ok"},
]
TASK = "Restock SKU-1042 by 4 units, then place an order."
HARBOR = TESTS / "fixtures" / "harbor"
NO_AGENT_TURN = "X-Rows-Without-Agent-Turn"


def outcome(reward: float, steps: list) -> TrialOutcome:
    return training_outcome(reward, TASK, steps)


def record(database, catalog, rewards: list[float], without_steps: tuple[int, ...] = ()) -> list[str]:
    """One trial per reward (those numbered in `without_steps`, from 0, with no step at all); their trial ids."""
    numbered = iter(range(len(rewards)))
    record_rewards(database, catalog, rewards, lambda r: outcome(r, [] if next(numbered) in without_steps else STEPS))
    with database.session(catalog.org_id) as session:
        sql = "SELECT t.id FROM evaluation_trials t WHERE t.environment_version_id = :v ORDER BY t.trial_number"
        return [str(i) for i in session.execute(text(sql), {"v": catalog.version_id}).scalars()]


def exclude(api: ApiClient, trial_id: str, reason: str) -> None:
    body = {"reviewState": "excluded", "reason": reason}
    response = api.client.patch(f"/api/v1/trials/{trial_id}", json=body, headers={"X-CSRFToken": api.token})
    assert response.status_code == 200, response.text


@pytest.fixture
def excluded_world(database, member, api):
    """Two versions of one environment. v1: rewards 0, 0.4, 1, 1, 1 (the last without steps); v2: 0.3 and 1. A
    reviewer excluded v1's 0.4 (its only recovery) and v2's 0.3 (so v2 has no preference pair left)."""
    v1 = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=5)
    first = record(database, v1, [0.0, 0.4, 1.0, 1.0, 1.0], without_steps=(4,))
    v2 = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 1.0}, 2, config_name="second")
    second = record(database, v2, [0.3, 1.0])
    exclude(api, first[1], "the verifier crashed mid-run")
    exclude(api, second[0], "the task text was garbled")
    return {"environment": v1.environment_id, "excluded": {first[1], second[0]}}


@pytest.fixture
def harbor_world(database, member, api, runner, tmp_path):
    """The real Harbor job (4 attempts of terminus-2: rewards 1, 0, 1, 0) imported through import-harbor, after
    one rewarded attempt lost its agent's turns (its trajectory is the task's user step only) and one failed attempt
    its trajectory file (as an oracle run leaves none): both export in TRL as the task plus "Done." without the
    rule."""
    job = writable_copy(HARBOR, tmp_path / "harbor") / "terminus2-hello"
    user_step_only = job / "hello-file__V789RmN" / "agent" / "trajectory.json"
    document = json.loads(user_step_only.read_text())
    document["steps"] = [s for s in document["steps"] if s["source"] == "user"]
    document.pop("final_metrics", None)
    user_step_only.write_text(json.dumps(document))
    (job / "hello-file__DJPAQXE" / "agent" / "trajectory.json").unlink()
    result = runner.invoke(args=["import-harbor", str(job), "--org", "Acme RL"])
    assert result.exit_code == 0, result.output
    with database.session(member.org.id) as session:
        environment = session.execute(text("SELECT id FROM environments WHERE name = 'hello-file'")).scalar_one()
    return {"environment": environment}


def page_rows(api: ApiClient, url: str) -> dict[str, dict]:
    """The export table as a user reads it: per kind, its "Lines now", and each download link with the number of
    lines the page says it holds (a TRL link: the rows the page names beside it, fetched when loaded later)."""
    body = api.get(url)
    assert body.status_code == 200
    rows = {}
    for row in parse(body.text).select("table.export-kinds tbody tr"):
        kind = one(row, 'th[scope="row"]').get_text(strip=True)
        lines_now = int(one(row, "td.num").get_text(strip=True))
        links = {}
        for link in row.select("a[download]"):
            href = attr(link, "href")
            fmt = parse_qs(urlsplit(href).query).get("format", ["atif-shaped"])[0]
            if fmt == "trl":
                holder = link.find_parent("div")
                assert holder is not None
                links[href] = trl_rows(api, holder)
            else:
                links[href] = (lines_now, None)
        rows[kind] = {"lines": lines_now, "links": links, "text": row.get_text(" ", strip=True)}
    return rows


def trl_rows(api: ApiClient, holder: Tag) -> tuple[int, int | None]:
    """The TRL rows the page says a link holds, and how many it says were left out without an agent turn."""
    counted = one(holder, ".trl-rows")
    later = counted.get("hx-get")
    if later:  # counted on request (preference pairs): the fragment the page loads
        counted = one(api.get(str(later), headers={"HX-Request": "true"}).text, ".trl-rows")
    number = re.match(r"\d+", counted.get_text(strip=True))
    assert number is not None, counted
    rows = int(number.group())
    left_out = re.search(r"(\d+) without an agent turn", holder.get_text(" ", strip=True))
    return rows, int(left_out.group(1)) if left_out else None


def downloaded(api: ApiClient, href: str):
    path = urlsplit(href)
    response = api.get(f"{path.path}?{path.query}")
    assert response.status_code == 200, response.text
    return response, [json.loads(line) for line in response.text.splitlines()]


def assert_every_link_holds_what_the_page_says(api: ApiClient, rows: dict[str, dict]) -> None:
    checked = 0
    for kind, row in rows.items():
        for href, (expected, left_out) in row["links"].items():
            response, got = downloaded(api, href)
            assert len(got) == expected, (kind, href, len(got), expected)
            if left_out is not None:
                assert response.headers[NO_AGENT_TURN] == str(left_out), href
            checked += 1
    assert checked == 15  # five kinds, three formats each


def test_the_page_counts_what_each_download_holds_after_exclusions(api, excluded_world):
    environment = excluded_world["environment"]
    rows = page_rows(api, f"/environments/{environment}/export")
    assert {kind: row["lines"] for kind, row in rows.items()} == {
        "all": 5,  # 7 rollouts, 2 excluded (the rollup said 7)
        "successful": 4,
        "failed": 1,  # 0 only: 0.4 and 0.3 were excluded (the rollup said 3)
        "recovery": 0,
        "preference": 1,  # v2's only lower reward was excluded (the rollup said 2)
    }
    assert_every_link_holds_what_the_page_says(api, rows)
    successful = sorted(rows["successful"]["links"].values(), key=lambda said: said[0])
    assert successful == [(3, 1), (4, None), (4, None)]  # TRL leaves out v1's rewarded trial without a step
    assert "1 without an agent turn" in rows["all"]["text"]


def test_exclusions_are_named_with_their_number_and_can_be_included(api, excluded_world):
    environment = excluded_world["environment"]
    page = parse(api.get(f"/environments/{environment}/export").text)
    said = one(page, "#export-exclusions").get_text(" ", strip=True)
    assert "2 trials excluded by review, left out of these counts" in said
    switch = one(page, "#export-exclusions a")
    assert "includeExcluded=true" in attr(switch, "href") and "Include" in switch.get_text()

    url = attr(switch, "href")
    rows = page_rows(api, url)
    assert {kind: row["lines"] for kind, row in rows.items()} == {
        "all": 7,
        "successful": 4,
        "failed": 3,
        "recovery": 2,
        "preference": 2,
    }
    assert all("includeExcluded=true" in href for row in rows.values() for href in row["links"])
    assert_every_link_holds_what_the_page_says(api, rows)
    included = one(parse(api.get(url).text), "#export-exclusions").get_text(" ", strip=True)
    assert "2 trials excluded by review, included in these counts" in included


def test_an_environment_without_exclusions_says_so(api, database, member):
    catalog = make_catalog(database, member.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=2)
    record(database, catalog, [0.0, 1.0])
    page = parse(api.get(f"/environments/{catalog.environment_id}/export").text)
    assert "No trial of this environment is excluded by review" in one(page, "#export-exclusions").get_text()


def test_the_explorers_export_links_name_the_exclusions_and_offer_them(api, excluded_world):
    environment = excluded_world["environment"]
    explorer = parse(api.get(f"/trials?environmentId={environment}").text)
    said = one(explorer, "#export-exclusions")
    assert "2 trials excluded by review are left out of these exports" in said.get_text(" ", strip=True)
    assert not any("includeExcluded" in attr(a, "href") for a in explorer.select("table.export-kinds a[download]"))
    included = parse(api.get(attr(one(said, "a"), "href")).text)
    links = [attr(a, "href") for a in included.select("table.export-kinds a[download]")]
    assert links and all("includeExcluded=true" in href and f"environmentId={environment}" in href for href in links)
    _, everything = downloaded(api, next(h for h in links if "kind=failed" in h and "format" not in h))
    assert len(everything) == 3


def test_excluded_and_included_lines_carry_the_reason_and_the_reviewer(api, excluded_world, member):
    environment = excluded_world["environment"]
    base = f"/api/v1/rollouts?kind=all&environmentId={environment}&includeExcluded=true"
    lines = downloaded(api, base)[1]
    excluded = {line["rolloutId"]: line for line in lines if line["reviewState"] == "excluded"}
    assert len(excluded) == 2
    reasons = {line["exclusion"]["reason"] for line in excluded.values()}
    assert reasons == {"the verifier crashed mid-run", "the task text was garbled"}
    assert {line["exclusion"]["reviewer"] for line in excluded.values()} == {member.email}
    assert all(line["exclusion"] is None for line in lines if line["reviewState"] != "excluded")
    documents = downloaded(api, base + "&format=atif")[1]
    for document in documents:
        Trajectory.model_validate(document)
        extra = document["extra"]
        assert extra["exclusion"] == (
            excluded[extra["rolloutId"]]["exclusion"] if extra["rolloutId"] in excluded else None
        )
    for rollout_id, line in excluded.items():
        single = api.get(f"/api/v1/rollouts/{rollout_id}").json
        assert single["exclusion"] == line["exclusion"] and single["reviewState"] == "excluded"


def test_trl_rows_of_imported_jobs_need_a_turn_of_the_agent(api, harbor_world):
    environment = harbor_world["environment"]
    rows = page_rows(api, f"/environments/{environment}/export")
    assert {kind: row["lines"] for kind, row in rows.items()} == {
        "all": 4,
        "successful": 2,
        "failed": 2,
        "recovery": 0,
        "preference": 1,
    }
    trl = {kind: next(v for h, v in row["links"].items() if "format=trl" in h) for kind, row in rows.items()}
    assert trl == {"all": (2, 2), "successful": (1, 1), "failed": (1, 1), "recovery": (0, 0), "preference": (1, None)}
    assert_every_link_holds_what_the_page_says(api, rows)
    for kind in ("all", "successful", "failed"):
        _, got = downloaded(api, f"/api/v1/rollouts?kind={kind}&format=trl&environmentId={environment}")
        for row in got:
            turns = [m for m in row["messages"] if m["role"] == "assistant"]
            assert turns and turns != [{"role": "assistant", "content": CLOSING_TURN}], row
            assert_message_shape(row["messages"])
            render_everywhere(row)  # TRL's is_conversational and maybe_apply_chat_template, every template


def test_a_bad_include_excluded_on_the_pages_answers_400(api, excluded_world):
    environment = excluded_world["environment"]
    for url in (f"/environments/{environment}/export", f"/trials?environmentId={environment}"):
        response = api.get(f"{url}{'&' if '?' in url else '?'}includeExcluded=yes")
        assert response.status_code == 400 and "includeExcluded" in response.text, url
