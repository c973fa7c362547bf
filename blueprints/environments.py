"""Environments area: the list of the organization's environments."""

from flask import Blueprint, redirect, url_for

from blueprints.htmx import render
from db import request_session
from queries.environments import list_environments

bp = Blueprint("environments", __name__)


@bp.get("/")
def home():
    """The dashboard starts at the environments list."""
    return redirect(url_for("environments.index"))


@bp.get("/environments")
def index():
    """List the current organization's environments (or say how to get some)."""
    return render("environments/index.html", "environment_list", environments=list_environments(request_session()))
