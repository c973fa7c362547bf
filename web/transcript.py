"""The trial page's transcript: steps shaped for reading (folds, JSON trees, grouped repeats, the log's cut).

Pure functions over the stored steps (domain/trajectory.py's structured form); the template renders what they
return. Nothing here drops text: a fold keeps the rest one click away, a JSON tree keeps the raw text beside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from domain.json_depth import loads
from domain.trajectory import HARNESS_TOOL, Step, ToolCall, ToolResult, command_text, raster_image
from domain.trial_log import log_lines

FOLD_LINES = 8  # a folded text shows this many lines…
FOLD_CHARS = 800  # …and never more than about this many characters of them
JSON_TREE_MIN_CHARS = 80  # shorter JSON reads fine as it is
JSON_TREE_OPEN_DEPTH = 2  # objects and arrays nested deeper start closed
MIN_REPEATS = 3  # this many identical consecutive calls or more become one group
HANDSHAKE_TOOLS = {"mcp": "MCP server", HARNESS_TOOL: "agent harness"}  # environment steps' tools, as named on the page


@dataclass(frozen=True)
class Image:
    """An image a tool returned, drawn from its base64 data (a data: URL the page's CSP allows for images)."""

    mime: str
    data: str

    @property
    def url(self) -> str:
        return f"data:{self.mime};base64,{self.data}"


@dataclass(frozen=True)
class Text:
    """A text as the transcript shows it: `shown`, then `rest` behind a fold ("" when nothing is folded), and
    the parsed JSON when the text is a JSON object or array worth a tree; `error`: a result that is an error
    (domain.trajectory's rule), shown as one."""

    text: str
    shown: str
    rest: str = ""
    tree: Any = None
    error: bool = False
    images: tuple[Image, ...] = ()  # the result's image parts, drawn under its text

    @property
    def rest_lines(self) -> int:
        return self.rest.count("\n") + (0 if self.rest.endswith("\n") else 1) if self.rest else 0

    @property
    def is_tree(self) -> bool:
        return self.tree is not None


def fold(text: str, lines: int = FOLD_LINES, chars: int = FOLD_CHARS) -> tuple[str, str]:
    """`text` split into what shows and what a fold hides: the first `lines` lines (held to about `chars`
    characters, cut at a line end, a space or a comma, never inside a word when one is near), folded only when
    the hidden part is at least as long as the shown part; else (`text`, "")."""
    cut = 0
    for _ in range(lines):
        end = text.find("\n", cut)
        if end == -1:
            cut = len(text)
            break
        cut = end + 1
    if cut > chars:
        space = max(text.rfind(mark, 0, chars) for mark in "\n ,;")  # minified JSON: after a comma
        cut = space + 1 if space >= chars // 2 else chars
    shown, rest = text[:cut], text[cut:]
    if not rest or len(rest) < len(shown):
        return text, ""
    return shown, rest


def json_tree(text: str) -> Any:
    """The parsed JSON object or array `text` holds (when long enough to be worth a tree), else None."""
    stripped = text.strip()
    if len(stripped) < JSON_TREE_MIN_CHARS or stripped[:1] not in ("{", "[") or stripped[-1:] not in ("}", "]"):
        return None
    try:
        value = loads(stripped)
    except ValueError:  # not JSON, or nested deeper than a tree is drawn (TooDeep): shown as text
        return None
    return value if isinstance(value, dict | list) and value else None


def readable(text: str) -> Text:
    """A text as the transcript shows it: a JSON tree, or folded to a few lines when long."""
    tree = json_tree(text)
    if tree is not None:
        return Text(text, text, tree=tree)
    shown, rest = fold(text)
    return Text(text, shown, rest)


@dataclass(frozen=True)
class Party:
    """Who a step, or a result in it, is from, as the page says it: `words` ("agent", "agent harness", "environment:
    bash", "worker") and `kind`, how it is styled (agent, harness, environment, worker, user, system, unknown)."""

    kind: str
    words: str


AGENT = Party("agent", "agent")
HARNESS = Party("harness", "agent harness")
ENVIRONMENT = Party("environment", "environment")
WORKER = Party("worker", "worker")
SOURCES = {"agent": AGENT, "environment": ENVIRONMENT, **{name: Party(name, name) for name in ("user", "system")}}


def step_party(step: Step) -> Party:
    """Who a step is from, from its source as the worker wrote it (a seed-shaped step is the agent's): an
    environment step the agent reported (its harness's, Step.is_harness_step) is the agent harness's, never the
    environment's; an MCP handshake is the MCP server's."""
    if step.is_harness_step:
        return HARNESS
    if step.source == "environment" and step.tool in HANDSHAKE_TOOLS:
        return Party("environment", f"environment: {HANDSHAKE_TOOLS[step.tool]}")
    return SOURCES.get(step.source or "agent", Party("unknown", "unknown source"))


def answered_by(call: ToolCall, offered: frozenset[str]) -> Party:
    """Who a call's result is from: the worker when it refused the call's arguments (no JSON object: the call
    keeps `argumentsText`), the environment's tool by name when the environment offered a tool of that name,
    else the environment (which refused a tool it never offered). A name the agent chose is never shown as a
    party's."""
    if "argumentsText" in call.other:
        return WORKER
    if call.name in offered:
        return Party("environment", f"environment: {call.name}")
    return ENVIRONMENT


@dataclass(frozen=True)
class Call:
    """One tool call of a step: its name, the call as text, its result (when one came back) and who that is from."""

    name: str
    command: str
    result: Text | None
    said_by: Party = ENVIRONMENT


@dataclass(frozen=True)
class StepView:
    """One step: who acted, under what name, what it said and thought, its calls with their results."""

    number: int
    source: str
    name: str | None
    record: Step
    message: Text | None
    reasoning: Text | None
    calls: list[Call]
    results: list[Text]  # results no call claims (an environment's handshake, a harness's note)
    duration_ms: float | None
    latency_ms: float | None
    tokens: dict[str, Any] | None
    signature: str | None  # the calls, as compared to find repeats; None for a step that called nothing
    error: bool = False  # a result of the step is an error (Step.is_error)
    party: Party = AGENT  # who the step is from (step_party)
    imported: bool = False  # the step came in with an imported trial: the other harness's record, not the worker's

    @property
    def anchor(self) -> str:
        return f"step-{self.number}"

    @property
    def errors(self) -> list[int]:
        """Its number when its result is an error (as Repeats.errors)."""
        return [self.number] if self.error else []

    @property
    def results_by(self) -> Party:
        """Who the results no call claims are from: an agent's step's, the environment; any other step's, its
        party (an MCP handshake's reply, an agent harness's note)."""
        return ENVIRONMENT if self.party == AGENT else self.party


@dataclass(frozen=True)
class Repeats:
    """Identical consecutive calls shown as one entry: "list_inventory x 9" (with a multiplication sign)."""

    steps: list[StepView]
    same_results: bool

    @property
    def name(self) -> str:
        return self.steps[0].name or "call"

    @property
    def first(self) -> int:
        return self.steps[0].number

    @property
    def last(self) -> int:
        return self.steps[-1].number

    @property
    def errors(self) -> list[int]:
        """The numbers of its steps whose result is an error."""
        return [view.number for view in self.steps if view.error]


@dataclass(frozen=True)
class Transcript:
    """The steps in order, identical consecutive calls grouped."""

    entries: list[StepView | Repeats] = field(default_factory=list)

    @property
    def errors(self) -> list[int]:
        """The numbers of the steps whose result is an error, in order (grouped ones too)."""
        return [number for entry in self.entries for number in entry.errors]

    @property
    def first_error(self) -> int | None:
        """The number of the first step whose result is an error; None when none is."""
        return next(iter(self.errors), None)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        return "\n".join(str(part.get("text")) for part in message if isinstance(part, dict) and part.get("text"))
    return ""


def step_name(step: Step) -> str | None:
    """The name a step is shown under: its calls' real tool names (not "mcp"), an environment step's command
    (`initialize`, `tools/list`), else its tool; None for a step that called nothing."""
    names = [call.name for call in step.tool_calls or () if call.name]
    if names:
        return ", ".join(dict.fromkeys(names))
    if step.tool in HANDSHAKE_TOOLS and step.command:
        return step.command.split(" ", 1)[0]
    return step.tool or None


def _images(content: Any) -> tuple[Image, ...]:
    """The image parts of a result's content that a page may draw (domain.trajectory.raster_image: a raster type
    with its data kept whole; a payload over the cap was left out when recorded, and stays named in the text)."""
    if not isinstance(content, list):
        return ()
    return tuple(Image(*image) for part in content if (image := raster_image(part)))


def _result(result: ToolResult) -> Text:
    """A result as the transcript shows it (its images under its text), marked when it is an error."""
    shown = replace(readable(result.text), images=_images(result.content))
    return replace(shown, error=True) if result.is_error else shown


def _calls(step: Step, offered: frozenset[str]) -> tuple[list[Call], list[Text]]:
    calls, results = step.tool_calls or (), step.results or ()
    if not calls:
        if results:
            return [], [_result(result) for result in results]
        return [], [readable(step.observation)] if step.observation else []
    by_id = {result.call_id: result for result in results if result.call_id is not None}
    claimed: set[int] = set()
    shaped = []
    for call in calls:
        name = call.name or step.tool or "call"
        command = step.command if len(calls) == 1 and step.command else None
        result = by_id.get(call.id) if call.id is not None else None
        if result is None and len(calls) == 1 and len(results) == 1 and results[0].call_id is None:
            result = results[0]  # one call and one unlinked result: they belong together
        if result is not None:
            claimed.add(id(result))
        shaped.append(
            Call(
                name,
                command or command_text(name, call.arguments or {}),
                _result(result) if result is not None else None,
                answered_by(call, offered),
            )
        )
    rest = [_result(result) for result in results if id(result) not in claimed]
    if not results and step.observation:
        rest = [readable(step.observation)]
    return shaped, rest


def step_view(step: Step, *, imported: bool = False, offered: frozenset[str] = frozenset()) -> StepView:
    """One stored step shaped for the transcript (`imported`: it came in with an imported trial; `offered`: the names
    of the tools the environment offered the agent)."""
    calls, results = _calls(step, offered)
    message = _message_text(step.message)
    signature = None
    if calls:
        signature = json.dumps(
            [(c.name, c.arguments) for c in step.tool_calls or ()], sort_keys=True, ensure_ascii=False, default=str
        )
    return StepView(
        number=step.number,
        source=step.source or "agent",
        name=step_name(step),
        record=step,
        message=readable(message) if message else None,
        reasoning=readable(step.reasoning) if step.reasoning else None,
        calls=calls,
        results=results,
        duration_ms=_number(step.duration_ms),
        latency_ms=_number(step.latency_ms),
        tokens=step.tokens,
        signature=signature,
        error=step.is_error,
        party=step_party(step),
        imported=imported,
    )


def transcript(
    steps: list[Step], min_repeats: int = MIN_REPEATS, *, imported: bool = False, offered: frozenset[str] = frozenset()
) -> Transcript:
    """The steps shaped for reading, each run of `min_repeats` or more identical consecutive calls grouped
    (`imported` and `offered` as step_view takes them)."""
    views = [step_view(record, imported=imported, offered=offered) for record in steps]
    entries: list[StepView | Repeats] = []
    index = 0
    while index < len(views):
        view = views[index]
        end = index + 1
        while view.signature is not None and end < len(views) and views[end].signature == view.signature:
            end += 1
        if end - index >= min_repeats:
            run = views[index:end]
            outputs = {tuple(call.result.text if call.result else None for call in v.calls) for v in run}
            entries.append(Repeats(run, len(outputs) == 1))
        else:
            entries.extend(views[index:end])
        index = end
    return Transcript(entries)


# The log's cut, as domain.outcome writes it: at the top when the end was kept, at the bottom when the start was.
_CUT_TOP = re.compile(r"\A… \[log truncated: (\d+) earlier characters\]\n")
_CUT_BOTTOM = re.compile(r"\n… \[log truncated: (\d+) more characters\]\Z")


@dataclass(frozen=True)
class LogLine:
    """A line of the log: `source` names the program that printed it (agent, server, verifier), None for the
    worker's own (or an imported log's)."""

    source: str | None
    text: str


@dataclass(frozen=True)
class MarkedLine:
    """A line of the log with a search's matches marked (`segments`: (text, matched) runs), and the program that
    printed it as LogLine says."""

    source: str | None
    segments: list[tuple[str, bool]]


@dataclass(frozen=True)
class Log:
    """The stored log without its truncation marker, and what the page says about the cut above it; `imported`: the
    log came in with an imported trial, so no line of it is labelled by this worker."""

    text: str
    cut_note: str | None
    imported: bool = False

    def _source(self, line: str) -> str | None:
        return None if self.imported else log_lines(line)[0][0]

    @property
    def lines(self) -> list[LogLine]:
        """The log's lines, each program's marked as its own (the worker labels them: domain/trial_log.py); an
        imported log's lines are none of this worker's programs'."""
        return [LogLine(self._source(line), line) for line in self.text.split("\n")]

    def marked(self, segments: Sequence[tuple[str, bool]]) -> list[MarkedLine]:
        """The log as a search marked it (the whole stored log, cut marker included), split into its lines, each
        with the program that printed it (as `lines` says), so a marked log shows whose each line is too."""
        lines: list[list[tuple[str, bool]]] = [[]]
        for run, hit in segments:
            for index, piece in enumerate(run.split("\n")):
                if index:
                    lines.append([])
                if piece:
                    lines[-1].append((piece, hit))
        return [MarkedLine(self._source("".join(run for run, _ in line)), line) for line in lines]


def _size(characters: int) -> str:
    return f"{round(characters / 1024)} KB" if characters >= 1024 else f"{characters} characters"


def log_view(log: str | None, *, imported: bool = False) -> Log:
    """The log with its cut said in words at the top: "first 48 KB omitted" (or, for logs recorded before the
    end was kept, "last 3 KB omitted"); `imported`: the log of an imported trial (see Log)."""
    log = log or ""
    if match := _CUT_TOP.match(log):
        note = f"first {_size(int(match.group(1)))} omitted; the end of the log is shown"
        return Log(log[match.end() :], note, imported)
    if match := _CUT_BOTTOM.search(log):
        note = f"last {_size(int(match.group(1)))} omitted (recorded before the end was kept)"
        return Log(log[: match.start()], note, imported)
    return Log(log, None, imported)
