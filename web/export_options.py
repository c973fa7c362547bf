"""What an export link asks beyond the trial filters, parsed once for the API, the Export page and the explorer."""

from __future__ import annotations

from typing import Annotated

from flask import abort
from pydantic import Field

from domain.rules import FLAG
from web.params import given_args
from web.validation import Invalid, QueryModel, parse

IncludeExcluded = Annotated[
    bool,
    FLAG,
    Field(description="true: also the trials a reviewer excluded from training (left out by default)"),
]


class ExportOptions(QueryModel):
    """includeExcluded: the pages' switch between exports without and with the trials a reviewer excluded."""

    include_excluded: IncludeExcluded = False


def export_options() -> ExportOptions:
    """The request's export options, or 400 naming the bad one (includeExcluded is true or false)."""
    try:
        return parse(ExportOptions, given_args())
    except Invalid as error:
        abort(400, description=error.detail)
