"""Datasets area: the organization's datasets (and a new one), a dataset with its versions and the form that builds
the next one (add tasks, preview them with their text, save), and a version's ordered tasks.

The version being built is kept in the form itself (web.dataset_drafts: a textarea of lines), never on the server.
Its tasks go through the rules and the write the API uses (domain.datasets, writes.datasets), so the page refuses
what the API refuses, in place (422, nothing written). Owners and members build; viewers read.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from flask import Blueprint, abort, flash, g, url_for
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from blueprints.auth import require_role
from blueprints.leaderboard import leaderboard_context
from domain.datasets import DatasetRefusals, DatasetRefused, TaskInput, tasks_sha256
from domain.rules import integer_from
from domain.specs import draws_worlds
from models import Dataset
from queries.datasets import (
    DatasetSummary,
    dataset_tasks,
    dataset_versions,
    find_dataset,
    list_datasets,
    task_texts,
    version_choices,
    version_holding,
    versions_named,
)
from web.database import request_session
from web.dataset_drafts import ADDED, draft_of, draft_tasks, line_of, note, read_draft, seed_runs
from web.forms import DatasetDraftForm, DatasetForm
from web.htmx import redirect_after_write, render
from web.params import page_number, query_int, query_value
from writes.datasets import add_dataset_version, check_tasks, create_dataset

bp = Blueprint("datasets", __name__)
CHOICES = 1000  # environment versions offered in the form's select
PREVIEW_TASKS = 100  # tasks shown with their text in a preview
TASKS_PER_PAGE = 100  # on a version's page


def _dataset_or_404(session: Session, dataset_id: uuid.UUID) -> DatasetSummary:
    dataset = find_dataset(session, dataset_id)
    if dataset is None:
        abort(404, description=f"No dataset {dataset_id} in this organization.")
    return dataset


@bp.get("/datasets")
def index():
    """The organization's datasets with their latest version and task count, and the form for a new one."""
    return _index_page(DatasetForm())


@bp.post("/datasets")
def create():
    """A new dataset from its name and description; refusals (a bad or taken name) redraw the form with 422."""
    require_role("member")
    form = DatasetForm()
    if form.validate():
        session = request_session()
        taken = f"A dataset named {form.name.data!r} already exists; choose another name."
        if session.scalar(select(Dataset.id).where(Dataset.name == form.name.data)):
            form.name.errors.append(taken)
        else:
            try:
                dataset = create_dataset(session, g.org_id, form.name.data, form.description.data)
            except IntegrityError:  # taken since it was checked
                session.rollback()
                form.name.errors.append(taken)
            else:
                session.commit()
                flash(f"Created the dataset {dataset.name}. Next: add its tasks and save its first version.")
                return redirect_after_write(url_for("datasets.show", dataset_id=dataset.id))
    return _index_page(form, status=422)


def _index_page(form: DatasetForm, status: int = 200):
    return render(
        "datasets/index.html", "new_dataset", status=status, datasets=list_datasets(request_session()), form=form
    )


@dataclass(frozen=True)
class PreviewTask:
    """A task as the preview and the version page show it."""

    position: int
    environment_version_id: uuid.UUID
    environment_name: str
    version: int
    kind: str
    world_seed: int | None
    text: str


@dataclass(frozen=True)
class Preview:
    """What saving the draft would pin: its first tasks with their text, how many in all, its sha256, and the
    version that already holds these tasks (None: saving makes a new one)."""

    tasks: list[PreviewTask]
    total: int
    sha256: str
    same_as: int | None


def _preview(session: Session, dataset_id: uuid.UUID, tasks: list[TaskInput]) -> Preview:
    shown = tasks[:PREVIEW_TASKS]
    named = versions_named(session, {t.environment_version_id for t in shown})
    texts = task_texts(session, [(t.environment_version_id, t.world_seed) for t in shown])
    rows = [
        PreviewTask(
            position,
            t.environment_version_id,
            named[t.environment_version_id].environment_name,
            named[t.environment_version_id].version,
            named[t.environment_version_id].kind,
            t.world_seed,
            text,
        )
        for position, (t, text) in enumerate(zip(shown, texts, strict=True), start=1)
    ]
    digest = tasks_sha256(tasks)
    return Preview(rows, len(tasks), digest, version_holding(session, dataset_id, digest))


@bp.get("/datasets/<uuid:dataset_id>")
def show(dataset_id: uuid.UUID):
    """A dataset: its versions, and the form that builds the next one (`?from=N` starts it from version N's tasks)."""
    session = request_session()
    dataset = _dataset_or_404(session, dataset_id)
    form = DatasetDraftForm()
    starting = query_int("from", 0, 0, 2**31 - 1)
    if starting:
        found = dataset_versions(session, dataset_id, starting)
        if not found:
            abort(404, description=f"{dataset.name} has no version {starting}.")
        listed = draft_of(
            (t.environment_version_id, t.world_seed, note(t.environment_name, t.version))
            for t in dataset_tasks(session, found[0])
        )
        if listed is None:
            too_long = f"v{starting}'s tasks are too many lines to edit here; build its successor with the API."
            return _show_page(session, dataset, form, error=too_long)
        form.draft.data = listed
    return _show_page(session, dataset, form)


def _show_page(
    session: Session,
    dataset: DatasetSummary,
    form: DatasetDraftForm,
    *,
    preview: Preview | None = None,
    error: str | None = None,
    refusals: list[tuple[str | None, str]] | None = None,
    unseen: bool = False,
    status: int = 200,
):
    shown = query_value("version", integer_from(1, 2**31 - 1))  # the leaderboard's version (the latest by default)
    board = leaderboard_context(session, dataset, shown)
    if board["board"] is None and shown is not None:
        abort(404, description=f"{dataset.name} has no version {shown}.")
    choices = version_choices(session, CHOICES + 1)
    if not choices:  # no form is drawn, so a refusal links to no input
        refusals = [(None, message) for _, message in refusals or []]
    return render(
        "datasets/show.html",
        "new_version",
        status=status,
        **board,
        versions=dataset_versions(session, dataset.id),
        choices=choices,
        most_choices=CHOICES,
        form=form,
        preview=preview,
        error=error,
        refusals=refusals or [],
        unseen=unseen,
    )


def _added_line(session: Session, form: DatasetDraftForm) -> str:
    """The draft line the add fieldset asks for: N tasks (world seeds 1..N) or the seeds written, of the version
    chosen (a Harbor-task version: its one task). DatasetRefused in the page's words when it cannot be one."""
    version_id = form.environment_version_id.data
    chosen = versions_named(session, [version_id]).get(version_id) if version_id else None
    if chosen is None:
        raise DatasetRefused("Environment version", "must be chosen: one of this organization's versions")
    count, seeds = form.count.data, form.world_seeds.data
    what = note(chosen.environment_name, chosen.version)
    if count is not None and seeds:
        raise DatasetRefused("N", "cannot be given with world seeds: add N tasks (seeds 1..N) or the seeds you list")
    if seeds:  # on a Harbor-task version too, where the rules refuse them in their words
        return line_of(chosen.id, seed_runs(seeds, ADDED), what)
    if not draws_worlds({"kind": chosen.kind}):
        return line_of(chosen.id, None, what)  # one task by itself, whatever N says
    if count is None:
        raise DatasetRefused(ADDED, "need N (world seeds 1..N) or world seeds")
    return line_of(chosen.id, [(1, count)], what)


@bp.post("/datasets/<uuid:dataset_id>/versions")
def build_version(dataset_id: uuid.UUID):
    """The version form's three buttons. Add puts the chosen tasks at the end of the list and previews it; Preview
    shows the list as written; Save pins the previewed list (the same tasks answer the version that holds them),
    and a list changed since its preview is previewed again instead. A refusal keeps the list as it was (422)."""
    require_role("member")
    session = request_session()
    summary = _dataset_or_404(session, dataset_id)
    form = DatasetDraftForm()
    if not form.validate():
        return _show_page(session, summary, form, refusals=form.summary({"action": None}), status=422)
    draft: str = form.draft.data
    try:
        if form.action.data == "add":
            line = _added_line(session, form)
            tasks = draft_tasks(read_draft(draft, line))
            check_tasks(session, tasks)
            form.draft.data = f"{draft}\n{line}" if draft else line
            form.count.data, form.count.raw_data, form.world_seeds.data = None, [], ""  # added: the fields empty
        else:
            tasks = draft_tasks(read_draft(draft))
            check_tasks(session, tasks)
        if form.action.data == "save" and form.previewed.data == tasks_sha256(tasks):
            return _save(session, dataset_id, tasks)
    except DatasetRefused as refused:  # every line that cannot be read, or every refusal of the list read
        every = refused.refusals if isinstance(refused, DatasetRefusals) else [refused]
        return _show_page(session, summary, form, refusals=[(_input_of(r, form), _words(r)) for r in every], status=422)
    preview = _preview(session, dataset_id, tasks)
    form.previewed.data = preview.sha256
    unseen = form.action.data == "save"  # a list saved as it was never previewed: shown first, nothing written
    return _show_page(session, summary, form, preview=preview, unseen=unseen)


def _save(session: Session, dataset_id: uuid.UUID, tasks: list[TaskInput]):
    dataset = session.scalar(select(Dataset).where(Dataset.id == dataset_id))
    assert dataset is not None  # found above, in this transaction
    version, new = add_dataset_version(session, dataset, tasks)
    number, name = version.version, dataset.name
    session.commit()
    if new:
        flash(f"Saved v{number} of {name}: {len(tasks)} tasks.")
    else:
        flash(f"These {len(tasks)} tasks are already v{number} of {name}: nothing new was saved.")
    return redirect_after_write(url_for("datasets.version", dataset_id=dataset_id, number=number))


def _input_of(refused: DatasetRefused, form: DatasetDraftForm) -> str:
    """The id of the input a refusal is about: the add fieldset's version, N or world seeds, else the task list."""
    if refused.field == ADDED:
        return "world_seeds" if form.world_seeds.data else "count"
    return {"N": "count", "Environment version": "environment_version_id"}.get(refused.field, "draft")


def _words(refused: DatasetRefused) -> str:
    """A refusal as the page says it: the field (a line, the task list, a form field) and what is wrong."""
    return f"{refused.field} {refused.says.rstrip('.')}."


@bp.get("/datasets/<uuid:dataset_id>/versions/<int:number>")
def version(dataset_id: uuid.UUID, number: int):
    """A dataset version's ordered tasks with their text, TASKS_PER_PAGE a page."""
    session = request_session()
    dataset = _dataset_or_404(session, dataset_id)
    found = dataset_versions(session, dataset_id, number) if number < 2**31 else []
    if not found:
        abort(404, description=f"{dataset.name} has no version {number}.")
    pinned, page = found[0], page_number()
    pages = -(-pinned.task_count // TASKS_PER_PAGE)
    if page > pages:
        abort(404, description=f"v{number} of {dataset.name} has {pinned.task_count} tasks: no page {page}.")
    rows = dataset_tasks(session, pinned, after=(page - 1) * TASKS_PER_PAGE, limit=TASKS_PER_PAGE)
    texts = task_texts(session, [(t.environment_version_id, t.world_seed) for t in rows])
    tasks = [
        PreviewTask(t.position, t.environment_version_id, t.environment_name, t.version, t.kind, t.world_seed, text)
        for t, text in zip(rows, texts, strict=True)
    ]
    return render(
        "datasets/version.html",
        "tasks",
        dataset=dataset,
        pinned=pinned,
        tasks=tasks,
        page=page,
        pages=pages,
        per_page=TASKS_PER_PAGE,
    )
