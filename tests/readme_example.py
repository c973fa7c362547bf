"""The README's "Evaluate a local model in five minutes", read from README.md and run as it is written there, so the
example and its tests cannot differ: tests/integration/worker/test_local_model.py runs it against the model, and
tests/integration/catalog/test_readme_example.py checks that the API takes every request it sends.
"""

from __future__ import annotations

import json
import re
import shlex
import sys

from tests.paths import ROOT

EXAMPLE = "## Evaluate a local model in five minutes"


def readme_example() -> list[list[str]]:
    """The lines of each shell block of the README's "Evaluate a local model in five minutes", as it has them."""
    section = (ROOT / "README.md").read_text().split(EXAMPLE, 1)[1].split("\n## ", 1)[0]
    return [block.splitlines() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def readme_server() -> list[str]:
    """The README's command that starts the model server, run with this virtualenv's Python."""
    (line,) = [line for line in readme_example()[0] if "serve.py" in line]
    python, script, *options = shlex.split(line, comments=True)
    assert python == ".venv/bin/python", line
    return [sys.executable, str(ROOT / script), *options]


def run_readme_lines(lines: list[str], runner, client, given: dict[str, str]) -> dict[str, str]:
    """Run the README's shell lines as bash would, each through what it calls: `.venv/bin/flask …` through the app's
    CLI runner and `api PATH BODY` (the README's curl function) through the test client with the token, `| tail -1`
    and `| id` as the README's functions do. A line of any other form fails the test, so the README holds only what
    this runs. `given` overrides the README's own values (MODEL_URL: "yours"); returns every variable, and `_` the
    last command's output."""
    variables = dict(given)

    def expand(word: str) -> str:
        return re.sub(r"\$(\w+)", lambda name: variables[name.group(1)], word)

    def command(text: str) -> str:
        words = [expand(word) for word in shlex.split(text, comments=True)]
        if words[0] == ".venv/bin/flask":
            result = runner.invoke(args=words[1:])
            assert result.exit_code == 0, (text, result.output)
            return result.output
        assert words[0] == "api" and len(words) == 3, f"the README's example runs {text!r}, which this test cannot"
        headers = {"Authorization": f"Bearer {variables['TOKEN']}", "Content-Type": "application/json"}
        answer = client.post(f"/api/v1/{words[1]}", data=words[2], headers=headers)
        assert answer.status_code in (201, 202), (text, answer.status_code, answer.text)
        return answer.text

    def pipeline(text: str) -> str:
        first, *filters = text.split(" | ")
        output = command(first)
        for step in filters:
            assert step in ("tail -1", "id"), f"the README pipes into {step!r}, which this test cannot"
            output = output.splitlines()[-1] if step == "tail -1" else json.loads(output)["id"]
        return output

    for line in lines:
        if function := re.match(r"(\w+)\(\) \{(.*)\}$", line):  # the README's helpers, as this runs them
            name, body = function.groups()
            assert name in ("api", "id"), line
            assert ('"http://127.0.0.1:5000/api/v1/$1" -d "$2"' in body) if name == "api" else ('["id"]' in body)
        elif assignment := re.match(r"(\w+)=(.*)$", line):
            name, value = assignment.groups()
            if name not in given:
                substitution = re.fullmatch(r"\$\((.*)\)", value.strip())
                variables[name] = (
                    pipeline(substitution.group(1)) if substitution else expand(shlex.split(value, comments=True)[0])
                )
        elif line.strip():
            variables["_"] = pipeline(line)
    return variables
