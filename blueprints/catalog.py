"""Create in the browser: an environment from a template, a new version of one, and evaluator configurations.

Each form is generated from the models the API validates with (web.catalog_forms), goes through the same
validation and writes (writes.environments), and is refused in place (422, nothing written) in the API's words.
Owners and members create; viewers get 403. A form's submission key makes a second POST of it (a double click)
answer with the first one's row (writes.once).
"""

from __future__ import annotations

import difflib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, abort, current_app, flash, g, request, url_for
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from blueprints.auth import require_role
from db.session import secrets_key_of
from domain.agents import validate_agent
from domain.errors import AgentConfigError, DomainError, SpecError
from domain.secret_env import hide_env
from domain.specs import UPLOADED, spec_sha256, uploaded, validate_spec
from models import Environment, EnvironmentVersion, EvaluatorConfig
from queries.environments import (
    environments_with_versions,
    find_environment,
    list_evaluators,
    runnable_spec,
    versions_of,
)
from web.catalog_bodies import EnvironmentCreate, EvaluatorConfigCreate
from web.catalog_forms import (
    AGENT_TEMPLATES,
    SPEC_TEMPLATES,
    CatalogForm,
    Template,
    posted_values,
    template_of_spec,
    values_under,
)
from web.database import request_session
from web.htmx import redirect_after_write, render
from web.params import optional_uuid, parse_uuid
from writes.environments import create_environment, create_environment_version, create_evaluator_config
from writes.once import once, submitted

bp = Blueprint("catalog", __name__)
SCRIPTED = {"kind": "scripted"}  # stands in for the agent while the body's own fields are checked


def _template(templates: dict[str, Template], default: str) -> Template:
    key = request.args.get("template", default)
    if key not in templates:
        abort(404, description=f"No template {key!r}: choose one of {', '.join(templates)}.")
    return templates[key]


def _submission_key() -> uuid.UUID | None:
    return parse_uuid(str(request.form.get("submission_key", "")))


def _config_json(example: dict[str, Any]) -> str:
    """The JSON view's text: as posted, else the example pretty-printed."""
    if request.method == "POST" and "config_json" in request.form:
        return str(request.form["config_json"])
    return json.dumps(example, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class Creation:
    """What differs between the create forms: the body model and its nested config, the templates, how the config
    is checked and the row written, what a taken name is called, and where the page goes after."""

    model: Any  # the row's model (its name is unique in the organization; its submission key in writes.once)
    body: type  # the API's body model
    nested_key: str  # "spec" or "agent"
    templates: dict[str, Template]
    default: str
    page: dict[str, str]  # the words and names catalog/create.html draws the form with
    what: str  # "an environment", "an evaluator configuration"
    check: Callable[[Any], dict[str, Any]]  # the nested config's validation (SpecError, AgentConfigError)
    refused: type[DomainError]
    write: Callable[[Any, Any, dict[str, Any], uuid.UUID | None], Any]  # (session, body, config, key) -> row
    done: Callable[[Any], str]  # the row -> where to go
    said: Callable[[Any], str]  # the row -> the flash
    stand_in: dict[str, Any] | None = None  # the nested config while the body's own fields are checked
    first_values: dict[str, Any] = field(default_factory=dict)


def _write_environment(session: Any, body: Any, spec: dict[str, Any], key: uuid.UUID | None) -> Environment:
    environment = create_environment(session, g.org_id, body.name, body.description, submission_key=key)
    create_environment_version(session, environment, spec)
    return environment


def _write_evaluator(session: Any, body: Any, agent: dict[str, Any], key: uuid.UUID | None) -> EvaluatorConfig:
    return create_evaluator_config(
        session,
        g.org_id,
        body.name,
        agent,
        body.attempt_count,
        max_steps=body.max_steps,
        timeout_s=body.timeout_s,
        checkpoint=body.checkpoint,
        step=body.step,
        submission_key=key,
    )


ENVIRONMENT = Creation(
    model=Environment,
    body=EnvironmentCreate,
    nested_key="spec",
    templates=SPEC_TEMPLATES,
    default="admin-console",
    page={
        "title": "New environment",
        "intro": "An environment is a task world agents are evaluated in. Its first version pins the spec below; a "
        "later change is a new version, never an edit.",
        "list_endpoint": "environments.index",
        "list_label": "Environments",
        "endpoint": "catalog.new_environment",
        "menu": "Start from",
        "form_id": "environment-form",
        "legend": "Spec",
        "button": "Create environment",
    },
    what="an environment",
    check=validate_spec,
    refused=SpecError,
    write=_write_environment,
    done=lambda row: url_for("environments.show", environment_id=row.id),
    said=lambda row: f"Created {row.name} with version 1. Next: an evaluator, then start a run.",
)
EVALUATOR = Creation(
    model=EvaluatorConfig,
    body=EvaluatorConfigCreate,
    nested_key="agent",
    templates=AGENT_TEMPLATES,
    default="scripted",
    page={
        "title": "New evaluator",
        "intro": "An evaluator configuration is the agent under test and how many independent attempts "
        "(attemptCount) each run gives every task, with its step and time budgets. It cannot be edited: a change is "
        "a new configuration.",
        "list_endpoint": "catalog.evaluators",
        "list_label": "Evaluators",
        "endpoint": "catalog.new_evaluator",
        "menu": "Agent kind",
        "form_id": "evaluator-form",
        "legend": "Agent",
        "button": "Create evaluator",
    },
    what="an evaluator configuration",
    check=validate_agent,
    refused=AgentConfigError,
    write=_write_evaluator,
    done=lambda row: url_for("catalog.evaluators", created=row.id),  # the list offers "Start a run with it"
    said=lambda row: f"Created the evaluator {row.name}.",
    stand_in=SCRIPTED,
    first_values={"attemptCount": 4},
)


@bp.route("/environments/new", methods=["GET", "POST"])
def new_environment():
    """A new environment with its first version, from a template's form (or its JSON view)."""
    return _create(ENVIRONMENT)


@bp.route("/evaluators/new", methods=["GET", "POST"])
def new_evaluator():
    """A new evaluator configuration of one agent kind, from its form (or its JSON view)."""
    return _create(EVALUATOR)


def _create(kind: Creation):
    """The create form of `kind`: drawn on GET; on POST checked (the body's fields, the nested config, the name)
    and written once per submission, or drawn again with every refusal in place (422, nothing written)."""
    require_role("member")
    template = _template(kind.templates, kind.default)
    form = CatalogForm.of(kind.body, kind.nested_key, template)
    if request.method == "GET":
        values = values_under(template.example, f"{kind.nested_key}.", form.nested) | kind.first_values
        return _page(kind, template, form, values, uuid.uuid4())
    values, key = posted_values(form.fields, request.form), _submission_key()
    body = form.body(request.form)
    session = request_session()
    context = {"max_trial_timeout_s": current_app.config["AGENTFORGE_MAX_TRIAL_TIMEOUT_S"]}
    checked = form.check_body(kind.body, body, kind.stand_in, **context)
    config = form.check_config(template.model, body.get(kind.nested_key), kind.check, kind.refused)
    name = str(body.get("name", "")).strip()
    if "name" not in form.errors.by_path and session.scalar(select(kind.model.id).where(kind.model.name == name)):
        earlier = submitted(session, kind.model, key)
        if earlier is not None:  # this very form was submitted before
            return redirect_after_write(kind.done(earlier))
        form.say("name", f"{kind.what.capitalize()} named {name!r} already exists: choose another name")
    if form.errors or checked is None or config is None:
        return _page(kind, template, form, values, key or uuid.uuid4(), status=422)
    try:
        row, new = once(session, kind.model, key, lambda: kind.write(session, checked, config, key))
    except kind.refused as error:
        form.refuse(str(error))
        return _page(kind, template, form, values, key or uuid.uuid4(), status=422)
    except IntegrityError:  # a name taken since it was checked
        session.rollback()
        form.say("name", f"{kind.what.capitalize()} named {checked.name!r} already exists: choose another name")
        return _page(kind, template, form, values, key or uuid.uuid4(), status=422)
    session.commit()
    if new:
        flash(kind.said(row))
    return redirect_after_write(kind.done(row))


def _page(kind: Creation, template: Template, form: CatalogForm, values: dict[str, Any], key: uuid.UUID, status=200):
    return render(
        "catalog/create.html",
        status=status,
        page=kind.page,
        chosen=template,
        templates=kind.templates.values(),
        form=form,
        values=values,
        submission_key=key,
        config_json=_config_json(template.example),
    )


@bp.route("/environments/<uuid:environment_id>/versions/new", methods=["GET", "POST"])
def new_version(environment_id: uuid.UUID):
    """A new immutable version from the newest one: its spec pre-filled; Preview shows the diff and the new
    sha256; an unchanged spec says which version it already is; secret values left empty are kept."""
    require_role("member")
    session = request_session()
    environment = find_environment(session, environment_id)
    if environment is None:
        abort(404, description=f"No environment {environment_id} in this organization.")
    versions = versions_of(session, environment_id)
    latest = versions[-1] if versions else None
    template = template_of_spec(latest.spec) if latest else _template(SPEC_TEMPLATES, "admin-console")
    if latest is not None and uploaded(latest.spec):
        abort(409, description=f"{environment.name} is a Harbor task: {UPLOADED}.")
    if template is None:
        abort(409, description=f"{environment.name} holds imported results: its versions come from its harness.")
    form = CatalogForm.of(EnvironmentCreate, "spec", template)
    form.top = []  # a version has no name of its own
    kept_values = runnable_spec(session, latest).get("env", {}) if latest else {}
    page: dict[str, Any] = {
        "environment": environment,
        "latest": latest,
        "kept": sorted(kept_values),
        "chosen": template,
    }
    if request.method == "GET":
        values = values_under(latest.spec if latest else template.example, "spec.", form.nested)
        example = latest.spec if latest else template.example
        return render(
            "catalog/version_new.html",
            form=form,
            values=values,
            submission_key=uuid.uuid4(),
            config_json=json.dumps(example, indent=2, ensure_ascii=False),
            preview=None,
            **page,
        )
    values, key = posted_values(form.fields, request.form), _submission_key()
    body = form.body(request.form, kept_values)
    preview = None
    spec = form.check_config(template.model, body.get("spec"), validate_spec, SpecError)
    if spec is not None:
        preview = _preview(session, versions, spec, kept_values)
        if request.form.get("action") == "save" and preview["same_as"] is None:
            try:
                version, _ = once(
                    session,
                    EnvironmentVersion,
                    key,
                    lambda: create_environment_version(session, environment, spec, submission_key=key),
                )
            except SpecError as error:
                form.refuse(str(error))
            else:
                session.commit()
                flash(f"Created v{version.version} of {environment.name} (sha256 {version.spec_sha256[:12]}…).")
                return redirect_after_write(url_for("environments.show", environment_id=environment.id))
    status = 422 if form.errors or (request.form.get("action") == "save" and preview and preview["same_as"]) else 200
    return render(
        "catalog/version_new.html",
        status=status,
        form=form,
        values=values,
        submission_key=key or uuid.uuid4(),
        config_json=str(request.form.get("config_json", "")),
        preview=preview,
        **page,
    )


def _preview(session, versions: list[EnvironmentVersion], spec: dict[str, Any], kept: dict[str, str]) -> dict[str, Any]:
    """What saving would pin: the diff against the newest version, the new sha256, the version it already is."""
    sha = spec_sha256(spec, secrets_key_of(session))
    same = next((v.version for v in versions if v.spec_sha256 == sha), None)
    before = json.dumps(versions[-1].spec, indent=2, sort_keys=True).splitlines() if versions else []
    after = json.dumps(hide_env(spec), indent=2, sort_keys=True).splitlines()
    diff = list(
        difflib.unified_diff(before, after, f"v{versions[-1].version}" if versions else "none", "new", lineterm="")
    )
    env = spec.get("env") or {}
    secrets = sorted(name for name in env if name in kept and env[name] != kept[name]) + sorted(
        name for name in env if name not in kept
    )
    return {"sha256": sha, "same_as": same, "diff": diff, "changed_secrets": secrets}


@bp.get("/evaluators")
def evaluators():
    """The organization's evaluator configurations: agent kind, attemptCount, budgets and runs. After one is created
    (`created`, where its form goes), the way on: "Start a run with it" on each environment that has a version (its
    start-run form with the evaluator chosen)."""
    session = request_session()
    rows = list_evaluators(session)
    created = optional_uuid("created")
    new = next((row.config for row in rows if row.config.id == created), None)
    run_on = environments_with_versions(session) if new is not None else []
    return render("catalog/evaluators.html", evaluators=rows, created=new, run_on=run_on)
