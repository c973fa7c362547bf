"""Packaging: pyproject.toml's [project] pins what requirements.txt pins, installs and checks every package of the
tree (and the folders the app reads, as agentforge_resources), and its `agentforge` script is `flask --app app …`
under its own name, with `serve`."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from app import create_app
from domain.install import RESOURCES
from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NOT_INSTALLED = ("tests", "bench")  # the checkout's own tools: the test suite and the benchmark
PROJECT_COMMANDS = {"init-db", "create-org", "create-user", "add-member", "invite", "create-token", "import-harbor"}
PROJECT_COMMANDS |= {"demo", "worker"}
FLASK_COMMANDS = {"run", "shell", "routes"}
SCRIPT_COMMANDS = {"serve"}  # the console script's own (gunicorn), beside the app's and Flask's


def pinned(requirements: Path) -> list[str]:
    """The requirements a pip requirements file lists, without comments, blank lines and `-r` includes."""
    lines = (line.split("#", 1)[0].strip() for line in requirements.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def packages_in_tree() -> list[str]:
    """Every package of the checkout (a folder with __init__.py under one at the top), dotted, but for NOT_INSTALLED."""
    found = []
    for top in sorted(ROOT.iterdir()):
        if top.name in NOT_INSTALLED or top.is_symlink() or not (top / "__init__.py").is_file():
            continue
        for folder, subfolders, files in os.walk(top):
            subfolders[:] = [name for name in subfolders if (Path(folder) / name / "__init__.py").is_file()]
            if "__init__.py" in files:
                found.append(Path(folder).relative_to(ROOT).as_posix().replace("/", "."))
    return sorted(found)


def test_pyproject_dependencies_are_requirements_txt():
    declared, required = PYPROJECT["project"]["dependencies"], pinned(ROOT / "requirements.txt")
    only_declared = sorted(set(declared) - set(required))
    only_required = sorted(set(required) - set(declared))
    assert not only_declared and not only_required, (
        f"pyproject.toml's [project] dependencies and requirements.txt differ: only in pyproject.toml {only_declared}, "
        f"only in requirements.txt {only_required}"
    )
    assert len(declared) == len(set(declared))
    assert all("==" in requirement for requirement in declared), "every dependency is an exact pin"


def test_every_package_is_installed_typed_linted_and_type_checked():
    setuptools = PYPROJECT["tool"]["setuptools"]
    packages = packages_in_tree()
    shipped = {name for name in setuptools["packages"] if name.split(".")[0] == RESOURCES.name}  # folders, not code
    assert sorted(set(setuptools["packages"]) - shipped) == packages
    assert {setuptools["package-dir"][name] for name in shipped} == {
        "templates",
        "static",
        "migrations",
        "migrations/versions",
    }
    assert sorted(setuptools["py-modules"]) == ["app", "cli"]
    top_level = sorted({package.split(".")[0] for package in packages})
    assert [name for name in top_level if not (ROOT / name / "py.typed").is_file()] == []
    assert sorted(PYPROJECT["tool"]["importlinter"]["root_packages"]) == top_level
    # mypy reads every package, the two modules, and the tests, examples and benchmarks (which are not installed).
    assert set(PYPROJECT["tool"]["mypy"]["files"]) == {*top_level, "app.py", "cli.py", "tests", "examples", "bench"}


def test_the_agentforge_script_names_a_function():
    module, function = PYPROJECT["project"]["scripts"]["agentforge"].split(":")
    assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.slow
def test_agentforge_help_lists_the_app_commands(database_urls, tmp_path):
    """`agentforge --help` run as pip's console script runs it: the factory's app is loaded, its commands listed."""
    module, function = PYPROJECT["project"]["scripts"]["agentforge"].split(":")
    script = f"import sys; from {module} import {function}; sys.exit({function}())"
    environment = {name: value for name, value in os.environ.items() if name != "FLASK_APP"}
    environment |= {"DATABASE_URL": database_urls.runtime, "ADMIN_DATABASE_URL": database_urls.admin}
    environment |= {"PYTHONPATH": str(ROOT)}  # where an editable install finds the checkout's modules
    result = subprocess.run(
        [sys.executable, "-c", script, "--help"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: agentforge ")
    listed = {line.split()[0] for line in result.stdout.split("\nCommands:\n", 1)[1].splitlines() if line.strip()}
    assert listed >= PROJECT_COMMANDS | FLASK_COMMANDS | SCRIPT_COMMANDS, result.stdout


def test_the_instance_folder_the_operator_names_holds_the_generated_keys(database_urls, tmp_path, monkeypatch):
    instance = tmp_path / "agentforge-instance"
    monkeypatch.setenv("AGENTFORGE_INSTANCE_DIR", str(instance))
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.delenv("AGENTFORGE_SECRETS_KEY", raising=False)
    urls = {"DATABASE_URL": database_urls.runtime, "ADMIN_DATABASE_URL": database_urls.admin}
    app = create_app({**urls, "MIGRATE_ON_START": False})
    app.extensions["agentforge_db"].dispose()
    assert app.instance_path == str(instance)
    assert app.config["SECRET_KEY"] == (instance / "secret_key").read_text()
    assert (instance / "secrets_key").is_file()
