"""No input gives a 5xx: arbitrary unicode in every page's query parameters, every form field and API parameter."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import AuthActions
from tests.factories import make_catalog

pytestmark = pytest.mark.slow  # hypothesis fuzz

# Text as a browser or script could send it: any code point but lone surrogates (not encodable in UTF-8),
# control characters and digits from every script included, plus the values that broke things before.
TRICKY = ["²", "٣", "¹²", "-²", "1²", "0", "-1", "99999999999999999999", "\x00", "\r\n", "\t1", " 1 ", "1.5", "\uff11"]
VALUES = st.one_of(
    st.sampled_from(TRICKY),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
    st.text(st.characters(categories=["Cc", "Nd", "No", "Zs"]), max_size=12),
)

# (method, URL with {env}/{version}/{config}/{run} holes, where the value goes, parameter name)
TARGETS = [
    ("GET", "/environments", "query", "page"),
    ("GET", "/environments/{env}", "query", "before"),
    ("GET", "/trials", "query", "failureCategory"),
    ("GET", "/trials", "query", "environmentId"),
    ("GET", "/trials", "query", "environmentVersionId"),
    ("GET", "/trials", "query", "evaluationRunId"),
    ("GET", "/trials", "query", "after"),
    ("GET", "/trials", "query", "status"),
    ("GET", "/trials", "query", "rewardBand"),
    ("GET", "/trials", "query", "minReward"),
    ("GET", "/trials", "query", "maxReward"),
    ("GET", "/trials", "query", "stagePassed"),
    ("GET", "/trials", "query", "stageFailed"),
    ("GET", "/trials", "query", "evaluatorConfigId"),
    ("GET", "/trials", "query", "source"),
    ("GET", "/trials", "query", "finishedAfter"),
    ("GET", "/trials", "query", "finishedBefore"),
    ("GET", "/trials", "query", "sort"),
    ("GET", "/trials/diff", "query", "a"),
    ("GET", "/trials/diff", "query", "b"),
    ("GET", "/api/v1/trials", "query", "stagePassed"),
    ("GET", "/api/v1/trials", "query", "minReward"),
    ("GET", "/api/v1/trials", "query", "finishedAfter"),
    ("GET", "/capability-gap", "query", "environmentId"),
    ("GET", "/capability-gap", "query", "environmentVersionId"),
    ("GET", "/partial-rewards", "query", "environmentId"),
    ("GET", "/login", "query", "next"),
    ("GET", "/api/v1/rollouts", "query", "kind"),
    ("GET", "/api/v1/rollouts", "query", "format"),
    ("GET", "/api/v1/rollouts", "query", "environmentId"),
    ("GET", "/api/v1/rollouts", "query", "environmentVersionId"),
    ("GET", "/api/v1/rollouts", "query", "evaluationRunId"),
    ("GET", "/api/v1/rollouts", "query", "after"),
    ("GET", "/api/v1/rollouts", "query", "failureCategory"),
    ("GET", "/api/v1/rollouts", "query", "stageFailed"),
    ("POST", "/login", "form", "email"),
    ("POST", "/login", "form", "password"),
    ("POST", "/login", "form", "next"),
    ("POST", "/environments/{env}/runs", "form", "attempt_count"),
    ("POST", "/environments/{env}/runs", "form", "environment_version_id"),
    ("POST", "/environments/{env}/runs", "form", "evaluator_config_id"),
    ("POST", "/runs/{run}/reset", "form", "mode"),
    ("POST", "/orgs/switch", "form", "organization_id"),
    ("POST", "/settings/members", "form", "email"),
    ("POST", "/settings/members", "form", "role"),
    ("POST", "/settings/members", "form", "password"),
    ("POST", "/settings/tokens", "form", "name"),
    ("POST", "/api/v1/environments", "json", "name"),
    ("POST", "/api/v1/environments", "json", "description"),
    ("POST", "/api/v1/evaluation-runs", "json", "environmentVersionId"),
    ("POST", "/api/v1/evaluation-runs", "json", "evaluatorConfigId"),
    ("POST", "/api/v1/evaluation-runs", "json", "attemptCount"),
    ("POST", "/api/v1/evaluation-runs/{run}/reset", "json", "mode"),
    ("POST", "/api/v1/evaluator-configs", "json", "name"),
    ("POST", "/api/v1/evaluator-configs", "json", "attemptCount"),
    ("POST", "/api/v1/evaluator-configs", "json", "maxSteps"),
    ("POST", "/api/v1/evaluator-configs", "json", "timeoutS"),
]
SENT = {"requests": 0}


@pytest.fixture
def owner_session(app, database, make_member):
    """A logged-in owner with an environment version, an evaluator configuration and a queued run."""
    owner = make_member("olga@acme.test", "Acme RL", "owner")
    catalog = make_catalog(database, owner.org.id, {"kind": "scripted", "skill": 1.0}, attempt_count=2)
    client = app.test_client()
    auth = AuthActions(client)
    assert auth.login(owner.email).status_code == 303
    token = auth.csrf()
    started = client.post(
        "/api/v1/evaluation-runs",
        json={"environmentVersionId": str(catalog.version_id), "evaluatorConfigId": str(catalog.config_id)},
        headers={"X-CSRFToken": token},
    )
    assert started.status_code == 202, started.text
    ids = {
        "env": str(catalog.environment_id),
        "version": str(catalog.version_id),
        "config": str(catalog.config_id),
        "run": started.json["id"],
    }
    return client, token, ids


def valid_request(ids: dict[str, str]) -> dict[str, dict[str, object]]:
    """The other fields of each form and body, valid, so the fuzzed value is what the server must cope with."""
    return {
        "/environments/{env}/runs": {
            "environment_version_id": ids["version"],
            "evaluator_config_id": ids["config"],
            "attempt_count": "2",
        },
        "/api/v1/evaluation-runs": {"environmentVersionId": ids["version"], "evaluatorConfigId": ids["config"]},
        "/api/v1/evaluator-configs": {"name": "fuzz", "agent": {"kind": "scripted"}, "attemptCount": 1},
        "/settings/members": {"email": "new@acme.test", "role": "member", "password": "long enough password"},
        "/login": {"email": "olga@acme.test", "password": "wrong password"},
    }


@pytest.mark.bad_input
@pytest.mark.parametrize("method, url, where, name", TARGETS, ids=[f"{m} {u} {w}:{n}" for m, u, w, n in TARGETS])
@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=VALUES)
def test_no_parameter_value_gives_a_server_error(owner_session, method, url, where, name, value):
    client, token, ids = owner_session
    path = url.format(**ids)
    others = dict(valid_request(ids).get(url, {}))
    headers = {"X-CSRFToken": token}
    if where == "query":
        response = client.open(path, method=method, query_string={name: value}, headers=headers)
    elif where == "form":
        form = {**others, name: value, "csrf_token": token}
        response = client.open(path, method=method, data=form, headers=headers)
    else:
        response = client.open(path, method=method, json={**others, name: value}, headers=headers)
    SENT["requests"] += 1
    assert response.status_code < 500, (method, path, name, value, response.status_code, response.text[:300])
    assert 200 <= response.status_code < 500


@pytest.mark.bad_input
@pytest.mark.parametrize("page", ["²", "٣", "-1", "0", "1.5", "\uff11", "99999999999"])
def test_a_page_number_that_is_not_ascii_digits_answers_400(owner_session, page):
    client, _, _ = owner_session
    response = client.get("/environments", query_string={"page": page})
    assert response.status_code == 400 and "page must be an integer from 1 to 100000" in response.text


@pytest.mark.bad_input
@pytest.mark.parametrize("count", ["²", "٣", "1²", "x"])
def test_an_attempt_count_that_is_not_ascii_digits_redraws_the_form_with_422(owner_session, count):
    client, token, ids = owner_session
    form = {**valid_request(ids)["/environments/{env}/runs"], "attempt_count": count, "csrf_token": token}
    response = client.post(f"/environments/{ids['env']}/runs", data=form)
    assert response.status_code == 422 and "Attempt count must be a whole number from 1 to 8." in response.text
