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
    (path, entry["operationId"])
    for path, methods in standalone_document()["paths"].items()
    for method, entry in methods.items()
    if method == "post"
)


def test_every_post_is_a_documented_write():
    paths = standalone_document()["paths"]
    assert len(WRITES) >= 6
    assert all("403" in paths[path]["post"]["responses"] for path, _ in WRITES), WRITES


@pytest.mark.parametrize(("path", "operation_id"), WRITES, ids=[op for _, op in WRITES])
def test_a_viewer_is_refused_every_write_and_nothing_is_written(viewer_api, count_rows, path, operation_id):
    url = "/api/v1" + re.sub(r"\{\w+\}", str(uuid.uuid4()), path)
    before = {table: count_rows(table) for table in TABLES}
    response = viewer_api.post(url, {"name": "x", "spec": {}, "mode": "new_workspace"})
    assert response.status_code == 403, (operation_id, response.status_code, response.text)
    assert response.json["detail"] == "This needs the member role; you are a viewer here."
    assert {table: count_rows(table) for table in TABLES} == before
