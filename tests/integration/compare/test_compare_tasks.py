"""Compare with the task as the unit, on trials imported with chosen tasks and rewards: the API's clustered errors,
paired and unpaired tests equal an independent computation (numpy, scipy.stats), and the warnings and the page say
what a researcher must know (evaluator mixes, one task, attempts that differ)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from scipy import stats

from domain import task_stats
from tests.helpers import attr, one, parse


def close(x, y):
    return x == pytest.approx(y, rel=1e-9, abs=1e-12)


def lines(version: str, tasks: dict[str, list[float]], agent: str = "strong", prefix: str = "") -> list[dict]:
    """Import lines: one run per task (its key `run`), attempt n of task t with reward tasks[t][n - 1]."""
    out = []
    for task, rewards in tasks.items():
        for attempt, reward in enumerate(rewards, start=1):
            out.append(
                {
                    "externalId": f"{prefix}{version}-{agent}-{task}-{attempt}",
                    "environment": {"name": "ledger", "spec": {"kind": "external", "source": "x", "task": version}},
                    "run": f"{prefix}{agent}-{task}",
                    "attempt": attempt,
                    "reward": reward,
                    "task": f"Reconcile ledger {task}",
                    "agent": agent,
                    "failureCategory": None if reward == 1 else "wrong_answer",
                }
            )
    return out


def load(api, *groups: list[dict]) -> dict[str, str]:
    """Import each group of lines in its own POST; answer {the version's spec task: environment version id}."""
    versions = {}
    for group in groups:
        body = "".join(json.dumps(line) + "\n" for line in group)
        answer = api.post("/api/v1/evaluation-runs/import", data=body, content_type="application/x-ndjson")
        assert answer.status_code == 201, answer.json
        run = api.client.get(f"/api/v1/evaluation-runs/{answer.json['runs'][0]}").json
        versions[group[0]["environment"]["spec"]["task"]] = run["environmentVersionId"]
    return versions


def key(task: str) -> str:
    return hashlib.md5(f"Reconcile ledger {task}".encode()).hexdigest()


def cr0(tasks: dict[str, list[float]], success: bool = False) -> tuple[float, float]:
    """The mean over trials and its CR0 standard error over tasks, from the trials themselves."""
    values = {t: np.asarray([float(r == 1) if success else r for r in rs]) for t, rs in tasks.items()}
    every = np.concatenate(list(values.values()))
    mean = every.mean()
    residual_sums = np.asarray([np.sum(v - mean) for v in values.values()])
    return float(mean), float(np.sqrt(np.sum(residual_sums**2)) / every.size)


# Six tasks on both sides, four attempts each, partial rewards; B does better on most tasks.
A_TASKS = {
    "t1": [1.0, 0.0, 0.0, 0.5],
    "t2": [0.0, 0.0, 0.25, 0.0],
    "t3": [1.0, 1.0, 0.0, 1.0],
    "t4": [0.0, 0.5, 0.0, 0.0],
    "t5": [1.0, 0.0, 1.0, 0.0],
    "t6": [0.0, 0.0, 0.0, 0.75],
}
B_TASKS = {
    "t1": [1.0, 1.0, 0.5, 1.0],
    "t2": [0.0, 1.0, 0.25, 0.0],
    "t3": [1.0, 1.0, 1.0, 1.0],
    "t4": [1.0, 0.5, 0.0, 1.0],
    "t5": [1.0, 0.0, 1.0, 1.0],
    "t6": [0.0, 1.0, 0.0, 0.75],
}


def test_shared_tasks_are_paired_by_task_with_clustered_errors(api):
    versions = load(api, lines("v1", A_TASKS), lines("v2", B_TASKS))
    body = api.client.get(f"/api/v1/compare?a={versions['v1']}&b={versions['v2']}").json
    for side, tasks in (("a", A_TASKS), ("b", B_TASKS)):
        assert body[side]["tasks"] == 6 and body[side]["trials"] == 24
        value, se = cr0(tasks, success=True)
        assert close(body[side]["passAtK"]["1"]["value"], value) and close(body[side]["passAtK"]["1"]["stderr"], se)
        value, se = cr0(tasks)
        assert close(body[side]["meanReward"]["value"], value) and close(body[side]["meanReward"]["stderr"], se)
        assert body[side]["evaluators"] == [
            {"id": body[side]["evaluators"][0]["id"], "label": "strong", "runs": 6, "trials": 24}
        ]
    tests = body["tests"]
    assert tests["paired"] is True and tests["unit"] == "task" and tests["pairedTasks"] == 6
    order = sorted(A_TASKS, key=key)
    for name, success in (("passAt1", True), ("meanReward", False)):
        a = np.asarray([np.mean([float(r == 1) if success else r for r in A_TASKS[t]]) for t in order])
        b = np.asarray([np.mean([float(r == 1) if success else r for r in B_TASKS[t]]) for t in order])
        expected = stats.ttest_rel(b, a)
        test = tests[name]
        assert test["method"] == task_stats.PAIRED_METHOD
        assert close(test["difference"], float(np.mean(b - a)))
        assert close(test["stderr"], float(np.std(b - a, ddof=1) / np.sqrt(6)))
        assert close(test["pValue"], expected.pvalue)
        ci = expected.confidence_interval(0.95)
        assert close(test["ci95"][0], max(-1, ci.low)) and close(test["ci95"][1], min(1, ci.high))
    assert body["warnings"] == []
    assert [row["task"] for row in body["tasks"]] == sorted(key(t) for t in A_TASKS)
    first = next(row for row in body["tasks"] if row["task"] == key("t3"))
    assert first["text"] == "Reconcile ledger t3"
    assert first["a"] == {"trials": 4, "successes": 3, "meanReward": 0.75, "finished": True, "status": None}
    assert first["b"] == {"trials": 4, "successes": 4, "meanReward": 1.0, "finished": True, "status": None}
    assert body["tasksTruncated"] is False
    # The page says how it paired, with the method named and no trial-number grid.
    html = api.client.get(f"/compare?a={versions['v1']}&b={versions['v2']}").text
    assert "paired t-test over task means, across 6 tasks both sides hold" in html
    assert "Same tasks, paired" not in html and "Task (trial)" not in html
    assert "Reconcile ledger t3" in html and "3 of 4" in html
    assert "\u22120.00" not in html and "-0.00" not in html
    assert "cluster-robust (CR0) standard error over tasks" in html


def test_a_task_cell_opens_that_tasks_trials_of_its_side(api):
    versions = load(api, lines("v1", A_TASKS), lines("v2", B_TASKS))
    page = parse(api.client.get(f"/compare?a={versions['v1']}&b={versions['v2']}").text)
    row = next(tr for tr in page.select("table.compare-tasks tbody tr") if "Reconcile ledger t3" in one(tr, "th").text)
    a_cell, b_cell = (one(td, "a") for td in row.select("td")[:2])
    assert (a_cell.text, b_cell.text) == ("3 of 4", "4 of 4")
    explorer = parse(api.client.get(attr(a_cell, "href")).text)
    listed = [
        attr(a, "href").split("/")[-1].split("?")[0] for a in explorer.select("table.trials tbody a[href^='/trials/']")
    ]
    tasks = {api.client.get(f"/trials/{trial}").text.count("Reconcile ledger t3") > 0 for trial in listed}
    assert len(listed) == 4 and tasks == {True}, listed
    assert f"task {key('t3')[:8]}" in one(explorer, "ul.chips").text
    # The API and the export read the same filter; a task key in capitals is the same key.
    listed = api.client.get(f"/api/v1/trials?environmentVersionId={versions['v2']}&task={key('t3').upper()}").json
    assert sorted(t["reward"] for t in listed["trials"]) == [1.0] * 4
    exported = api.client.get(f"/api/v1/rollouts?kind=failed&environmentVersionId={versions['v1']}&task={key('t3')}")
    assert exported.status_code == 200 and len(exported.text.splitlines()) == 1


@pytest.mark.leak
def test_another_organizations_task_key_opens_nothing(api, app, make_member, make_org):
    from tests.conftest import ApiClient

    load(api, lines("v1", A_TASKS))
    mallory = ApiClient(app.test_client(), make_member("mallory@rival.test", make_org("Rival"), "member"))
    listed, exported = f"/api/v1/trials?task={key('t3')}", f"/api/v1/rollouts?kind=all&task={key('t3')}"
    assert len(api.get(listed).json["trials"]) == 4 and len(api.get(exported).text.splitlines()) == 4
    assert mallory.get(listed).json["trials"] == []
    answer = mallory.get(exported)
    assert answer.status_code == 200 and answer.text == ""


def test_different_tasks_are_unpaired_on_clustered_errors(api):
    other = {f"u{i}": rewards for i, rewards in enumerate(B_TASKS.values())}
    versions = load(api, lines("v1", A_TASKS), lines("v2", other))
    body = api.client.get(f"/api/v1/compare?a={versions['v1']}&b={versions['v2']}").json
    tests = body["tests"]
    assert tests["paired"] is False and tests["pairedTasks"] == 0 and tests["unit"] == "task"
    (ma, sa), (mb, sb) = cr0(A_TASKS), cr0(other)
    test = tests["meanReward"]
    assert test["method"] == task_stats.UNPAIRED_METHOD
    assert close(test["difference"], mb - ma) and close(test["stderr"], np.sqrt(sa**2 + sb**2))
    df = (sa**2 + sb**2) ** 2 / (sa**4 / 5 + sb**4 / 5)
    assert close(test["pValue"], 2 * stats.t.sf(abs(mb - ma) / np.sqrt(sa**2 + sb**2), df))
    assert len(body["tasks"]) == 12 and all((row["a"] is None) != (row["b"] is None) for row in body["tasks"])
    # pass@1 is not significant here: the power is counted in tasks, from the task-clustered variance.
    (_, pa), (_, pb) = cr0(A_TASKS, success=True), cr0(other, success=True)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    more = int(np.ceil(z**2 * (pa**2 * 6 + pb**2 * 6) / 0.1**2)) - 6
    verdict = tests["passAt1"]["verdict"]
    assert verdict.startswith("No detectable difference in pass@1") and "across 6 tasks on A and 6 on B" in verdict
    assert f"about {more} more tasks per side would detect a difference of 0.1" in verdict


def test_evaluator_mix_is_warned_with_counts_per_evaluator(api):
    # Simpson: B beats A under the strong evaluator, but B's version also holds weak runs A lacks.
    strong_a = {f"t{i}": [1.0, 0.0, 0.0, 0.0] for i in range(4)}
    strong_b = {f"t{i}": [1.0, 1.0, 0.0, 0.0] for i in range(4)}
    weak_b = {f"t{i}": [0.0, 0.0, 0.0, 0.0] for i in range(4)}
    versions = load(api, lines("v1", strong_a), lines("v2", strong_b), lines("v2", weak_b, agent="weak"))
    body = api.client.get(f"/api/v1/compare?a={versions['v1']}&b={versions['v2']}").json
    codes = [w["code"] for w in body["warnings"]]
    assert "evaluator-mix" in codes
    mix = next(w["message"] for w in body["warnings"] if w["code"] == "evaluator-mix")
    assert "A: strong 16, weak 0; B: strong 16, weak 16" in mix
    assert [(e["label"], e["runs"], e["trials"]) for e in body["b"]["evaluators"]] == [
        ("strong", 4, 16),
        ("weak", 4, 16),
    ]
    assert body["b"]["passAtK"]["1"]["value"] == pytest.approx(8 / 32)  # pooled: below A's 4 / 16
    html = api.client.get(f"/compare?a={versions['v1']}&b={versions['v2']}").text
    assert one(html, '#warnings li[data-code="evaluator-mix"]') and "Per evaluator" in html
    table = one(html, "table.compare-evaluators").get_text()
    assert "weak" in table and "strong" in table
    # The evaluator both sides ran is compared alone, paired over its 4 shared tasks: each went from 1/4 to 2/4, so
    # the differences have no spread and the exact sign test reads them (p = 2 / 2**4).
    verdicts = parse(html).select("p.evaluator-verdict")
    alone = next(p.get_text() for p in verdicts if one(p, "strong").get_text() == "strong alone:")
    assert f"B - A = +0.25, p = {stats.binomtest(4, 4, 0.5).pvalue:.2f}, {task_stats.SIGN_TEST}" in alone
    # The API says the same per evaluator.
    (by_strong,) = body["tests"]["byEvaluator"]
    assert by_strong["label"] == "strong" and by_strong["evaluatorConfigId"] == body["b"]["evaluators"][0]["id"]
    assert by_strong["passAt1"]["difference"] == pytest.approx(0.25)
    assert by_strong["passAt1"]["pValue"] == pytest.approx(stats.binomtest(4, 4, 0.5).pvalue)
    assert by_strong["passAt1"]["verdict"] in alone or alone in by_strong["passAt1"]["verdict"]
    # Narrowed to the strong evaluator on both sides, the mix agrees and B is ahead.
    strong = body["b"]["evaluators"][0]["id"]
    narrowed = api.client.get(
        f"/api/v1/compare?a={versions['v1']}&b={versions['v2']}&bEvaluatorConfigId={strong}&aEvaluatorConfigId={strong}"
    ).json
    assert "evaluator-mix" not in [w["code"] for w in narrowed["warnings"]]
    assert narrowed["tests"]["passAt1"]["difference"] == pytest.approx(0.25)


def test_one_task_pair_is_warned_and_keeps_the_exact_tests(api):
    versions = load(api, lines("v1", {"t1": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]}), lines("v2", {"t1": [1.0] * 8}))
    body = api.client.get(f"/api/v1/compare?a={versions['v1']}&b={versions['v2']}").json
    assert body["tests"]["unit"] == "trial" and body["tests"]["paired"] is False
    assert body["tests"]["passAt1"]["method"] == "Fisher's exact test"
    assert close(body["tests"]["passAt1"]["pValue"], stats.fisher_exact([[8, 0], [1, 7]]).pvalue)
    one = [w["message"] for w in body["warnings"] if w["code"] == "one-task"]
    assert one == [
        "A holds one task, 8 attempts: this says nothing about other tasks.",
        "B holds one task, 8 attempts: this says nothing about other tasks.",
    ]
    html = api.client.get(f"/compare?a={versions['v1']}&b={versions['v2']}").text
    assert "one task, 8 attempts: this says nothing about other tasks" in html


def test_pass_at_k_with_mixed_attempts_reads_only_tasks_with_enough(api):
    tasks = {"t1": [1.0], "t2": [1.0, 0.0, 0.0, 0.0], "t3": [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]}
    versions = load(api, lines("v1", tasks), lines("v2", tasks))
    body = api.client.get(f"/api/v1/compare?a={versions['v1']}&b={versions['v2']}").json
    table = body["a"]["passAtK"]
    assert table["2"]["tasks"] == 2 and table["4"]["tasks"] == 2 and table["5"]["tasks"] == 1
    assert table["8"]["tasks"] == 1 and "9" not in table
    # pass@4: t2 (1 success of 4) always holds its success; t3 (2 of 8): 1 - C(6, 4) / C(8, 4). t1 is left out.
    assert close(table["4"]["value"], np.mean([1.0, 1 - (6 * 5 * 4 * 3) / (8 * 7 * 6 * 5)]))
    assert table["8"]["value"] == 1.0 and table["8"]["ci95"] is None
    assert "attempts-differ" in [w["code"] for w in body["warnings"]]
    assert any("A: 1, 4, 8 attempts per task" in w["message"] for w in body["warnings"])
    # Identical sides: every delta reads 0.00 in neutral, never "-0.00" and never coloured.
    html = api.client.get(f"/compare?a={versions['v1']}&b={versions['v2']}").text
    assert "-0.00" not in html and "\u22120.00" not in html
    assert parse(html).select(".delta.up, .delta.down") == []


def test_statements_do_not_grow_with_tasks_runs_or_evaluators(api, database):
    from tests.helpers import counting_queries

    versions = load(api, lines("v1", A_TASKS), lines("v2", B_TASKS))
    urls = [f"/compare?a={versions['v1']}&b={versions['v2']}", f"/api/v1/compare?a={versions['v1']}&b={versions['v2']}"]

    def budget() -> list[int]:
        counts = []
        for url in urls:
            with counting_queries(database) as statements:
                assert api.client.get(url).status_code == 200
            counts.append(len(statements))
        return counts

    before = budget()
    more = {f"m{i}": [1.0, 0.0, 0.5] for i in range(30)}
    load(api, lines("v1", more, prefix="more-"), lines("v2", more, agent="weak", prefix="more-"))
    after = budget()
    assert after == before, (before, after)
    assert max(after) <= 12, after
