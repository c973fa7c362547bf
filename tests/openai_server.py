"""A local OpenAI-compatible chat-completions server answering scripted completions, for the openai-chat tests.

Run as its own process: `python tests/openai_server.py <scenario> <request log>`. It binds this host's own
address (`host_address()`: a sandbox with a network has loopback of its own, never the host's) on a free port,
prints the port on its first line of stdout, and appends every request it gets (headers and body) as one
JSON line to the request log. What it answers depends on the scenario and on the conversation's turn (how many
assistant messages the request holds), so every trial of a run gets the same conversation:

* `solve`: the admin-console task solved in five turns, with a 429 before the first turn and a 503 before the
  third (both retried), reasoning content, arguments that are not JSON (turn 2), two calls in one turn (turn 3),
  and a final answer that quotes the bearer key it was sent (so masking is exercised);
* `loop`: list_inventory every turn, 1,100 tokens each (for the token budget);
* `down`: HTTP 503 to every request;
* `unauthorized`: HTTP 401 to every request;
* `unparsable`: HTTP 500 naming a parse error to every request (not worth a retry).
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TASK = re.compile(
    r"Restock (SKU-\d+) .*? by (\d+) units, then place an order of (\d+) units of \S+ for customer (CUST-\d+)"
)
# Usage of each turn of `solve`: (prompt, completion) tokens.
SOLVE_USAGE = [(120, 18), (200, 20), (300, 30), (400, 12), (450, 15)]
FAULTS = {("solve", 0): [429], ("solve", 2): [503]}  # answered before the turn's completion, in every conversation
SEEN: Counter[tuple[str, int, str]] = Counter()
LOCK = threading.Lock()


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(turn: int, message: dict[str, Any], usage: tuple[int, int]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, **message}
    return {
        "id": f"chatcmpl-{turn}",
        "object": "chat.completion",
        "created": 1764504000,
        "model": "scripted-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def solve(turn: int, body: dict[str, Any], key: str) -> dict[str, Any]:
    """The turn's completion of the `solve` conversation."""
    task = next(m["content"] for m in body["messages"] if m["role"] == "user")
    sku, restock, quantity, customer = TASK.search(task).groups()  # type: ignore[union-attr]
    said: dict[str, Any]
    if turn == 0:
        said = {"content": "Let me look at the inventory first.", "reasoning_content": f"The task is about {sku}."}
        said["tool_calls"] = [call("call_inv", "list_inventory", "{}")]
    elif turn == 1:
        cut_off = f'{{"sku": "{sku}", "quantity": '  # not JSON: the model's arguments stop mid-object
        said = {"content": "Restocking now.", "tool_calls": [call("call_bad", "restock", cut_off)]}
    elif turn == 2:
        restocking = json.dumps({"sku": sku, "quantity": int(restock)})
        ordering = json.dumps({"customer_id": customer, "sku": sku, "quantity": int(quantity)})
        said = {"reasoning_content": "My arguments were cut off; both calls again, in one turn."}
        said["tool_calls"] = [call("call_restock", "restock", restocking), call("call_order", "create_order", ordering)]
    elif turn == 3:
        tool_text = " ".join(m["content"] for m in body["messages"] if m["role"] == "tool")
        order = re.findall(r"ORD-\d+", tool_text)[-1]
        said = {"content": "", "tool_calls": [call("call_checkout", "checkout", json.dumps({"order_id": order}))]}
    else:
        said = {"content": f"Restocked {sku} and placed the order (I was called with key {key}).", "reasoning": "Done."}
    return completion(turn, said, SOLVE_USAGE[min(turn, len(SOLVE_USAGE) - 1)])


class Handler(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: the scenario's answer for the request's turn."""

    scenario = "solve"
    log_path = ""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def answer(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        with LOCK, open(self.log_path, "a") as log:
            log.write(json.dumps({"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}))
            log.write("\n")
        if self.path != "/v1/chat/completions":
            self.answer(404, {"error": {"message": f"no route {self.path}"}})
            return
        if self.scenario == "down":
            self.answer(503, {"error": {"message": "overloaded"}}, {"Retry-After": "0"})
            return
        if self.scenario == "unparsable":  # as llama.cpp answers a history holding arguments it cannot parse
            self.answer(500, {"error": {"message": "Failed to parse tool call arguments as JSON"}})
            return
        if self.scenario == "unauthorized":
            self.answer(401, {"error": {"message": "Incorrect API key provided"}})
            return
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        conversation = (self.scenario, turn, next(m["content"] for m in body["messages"] if m["role"] == "user"))
        with LOCK:
            seen = SEEN[conversation]
            SEEN[conversation] += 1
        faults = FAULTS.get((self.scenario, turn), [])
        if seen % (len(faults) + 1) < len(faults):  # trials of one world ask the same: each gets the faults
            status = faults[seen % (len(faults) + 1)]
            self.answer(status, {"error": {"message": "slow down" if status == 429 else "busy"}}, {"Retry-After": "0"})
            return
        if self.scenario == "loop":
            said = {"content": "Looking again.", "tool_calls": [call(f"call_{turn}", "list_inventory", "")]}
            self.answer(200, completion(turn, said, (1000, 100)))
            return
        self.answer(200, solve(turn, body, key))


def host_address() -> str:
    """This machine's own IPv4 address on its outgoing interface (a UDP socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("198.51.100.1", 9))  # TEST-NET-2: nothing is sent, the route only picks the interface
        return probe.getsockname()[0]


def main() -> None:
    Handler.scenario, Handler.log_path = sys.argv[1], sys.argv[2]
    server = ThreadingHTTPServer((host_address(), 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
