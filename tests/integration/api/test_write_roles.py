"""Every /api/v1 write is refused to a viewer before it runs, and the document says so: the role is declared on the
operation (blueprints.api.contract.write), so a write added later cannot forget it."""

from __future__ import annotations

import re
import uuid

import pytest

from blueprints.api.contract import standalone_document
from tests.helpers import TABLES

pytestmark = pytest.mark.bad_input

WRITES = sorted(
    (path, method, entry["operationId"])
    for path, methods in standalone_document()["paths"].items()
    for method, entry in methods.items()
    if method != "get"
)


def test_every_write_is_documented_as_refused_to_viewers():
    paths = standalone_document()["paths"]
    assert len(WRITES) >= 12 and {method for _, method, _ in WRITES} == {"post", "put", "patch", "delete"}
    assert all("403" in paths[path][method]["responses"] for path, method, _ in WRITES), WRITES


@pytest.mark.parametrize(("path", "method", "operation_id"), WRITES, ids=[op for _, _, op in WRITES])
def test_a_viewer_is_refused_every_write_and_nothing_is_written(viewer_api, count_rows, path, method, operation_id):
    url = "/api/v1" + re.sub(r"\{\w+\}", str(uuid.uuid4()), path)
    before = {table: count_rows(table) for table in TABLES}
    body = {"name": "x", "spec": {}, "mode": "new_workspace", "labels": [], "body": "x"}
    response = viewer_api.client.open(url, method=method.upper(), json=body, headers={"X-CSRFToken": viewer_api.token})
    assert response.status_code == 403, (operation_id, response.status_code, response.text)
    assert response.json["detail"] == "This needs the member role; you are a viewer here."
    assert {table: count_rows(table) for table in TABLES} == before
