"""The README's local-model example, read from README.md, through the API without its model: every command and
request it sends is taken as written (the run itself, against the model, is tests/integration/worker/
test_local_model.py)."""

from __future__ import annotations

import json

from tests.readme_example import readme_example, run_readme_lines


def test_the_readmes_local_model_example_makes_its_organization_token_environment_evaluator_and_run(
    app, runner, database
):
    ran = run_readme_lines(readme_example()[1], runner, app.test_client(), {"MODEL_URL": "http://192.0.2.2:8080/v1"})
    run = json.loads(ran["_"])
    assert run["status"] == "queued" and run["attemptCount"] == 5, run  # "five attempts"
    evaluator = (
        app.test_client()
        .get(f"/api/v1/evaluator-configs/{ran['EVALUATOR']}", headers={"Authorization": f"Bearer {ran['TOKEN']}"})
        .json
    )
    assert evaluator["timeoutS"] == 300, (
        evaluator
    )  # a model on a busy machine's CPU needs it (60 s: every one timed out)
    assert evaluator["agent"]["baseUrl"] == "http://192.0.2.2:8080/v1", evaluator
