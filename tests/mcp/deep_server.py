"""An MCP server that nests its JSON deep on purpose: deep_server.py WHERE DEPTH.

It speaks JSON-RPC lines by hand, so each line is exactly as deep as asked: WHERE is `schema` (tools/list's line,
through a tool's inputSchema), `result` (a tools/call answer's line, through a content part's `_meta`), `verifier`
(the score tool's text: a JSON document nested DEPTH levels), `task` (the task data its instructions carry, as
JSON text nested DEPTH levels) or `fine` (nothing deep).
"""

import json
import sys

where, depth = sys.argv[1], int(sys.argv[2])


def nested(levels: int) -> str:
    """JSON text of arrays nested `levels` deep."""
    return "[" * levels + "]" * levels


def schema(levels: int) -> str:
    """A JSON schema of objects nested `levels` deep (each property's schema holds the next)."""
    return '{"type": "object", "properties": {"x": ' * (levels // 2) + "{}" + "}}" * (levels // 2)


def answer(message_id, result: str) -> None:
    sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(message_id)}, "result": {result}}}\n')
    sys.stdout.flush()


SCHEMA = '{"type": "object", "properties": {}}'
for line in sys.stdin:
    message = json.loads(line)
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        continue  # a notification
    if method == "initialize":
        info = '{"name": "deep", "version": "1"}'
        said = "Poke the server once." + (f"AGENTFORGE_TASK_DATA:{nested(depth)}" if where == "task" else "")
        answer(
            message_id,
            f'{{"protocolVersion": "2025-06-18", "capabilities": {{"tools": {{}}}}, "serverInfo": '
            f'{info}, "instructions": {json.dumps(said)}}}',
        )
    elif method == "tools/list":
        # the line: {result: {tools: [{inputSchema: …}]}} holds the nesting from depth 5 (an odd depth: one more)
        listed_schema = schema(depth - 4) if where == "schema" else SCHEMA
        tools = [{"name": "poke", "description": "Poke."}, {"name": "score", "description": "Verifier."}]
        listed = ", ".join(
            f'{{"name": "{t["name"]}", "description": "{t["description"]}", "inputSchema": {listed_schema}}}'
            for t in tools
        )
        answer(message_id, f'{{"tools": [{listed}]}}')
    elif method == "tools/call" and message["params"]["name"] == "score":
        text = nested(depth) if where == "verifier" else '{"stage_poked": 1}'
        answer(message_id, f'{{"content": [{{"type": "text", "text": {json.dumps(text)}}}], "isError": false}}')
    elif method == "tools/call":
        # the line: {result: {content: [{_meta: …}]}} holds the nesting from depth 5
        meta = f', "_meta": {{"x": {nested(depth - 5)}}}' if where == "result" else ""
        answer(message_id, f'{{"content": [{{"type": "text", "text": "poked"{meta}}}], "isError": false}}')
    else:
        sys.stdout.write(
            f'{{"jsonrpc": "2.0", "id": {json.dumps(message_id)}, "error": {{"code": -32601, '
            '"message": "unknown method"}}\n'
        )
        sys.stdout.flush()
