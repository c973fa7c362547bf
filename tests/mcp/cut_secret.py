"""The environment side printing its secret (env LEAK) right where the worker cuts what it keeps: cut_secret.py MODE.

server-line: an MCP server whose first stdout line is not JSON-RPC, the secret across the 200 characters the log
quotes of it; server-stderr: prints the secret on stderr across the 8 KiB kept of it, then serves as faulty_server.py
fine; verifier: a verifier command that fails with the secret in its stderr across the 500 characters kept of its end;
server-answer: an MCP server whose tools/list answer the SDK refuses, the secret across pydantic's cut of the input;
verifier-limit: a verifier command that fails with the sign of a limit (MemoryError), the secret across the 300
characters of its stderr's end the breach quotes.
"""

import json
import os
import sys
from pathlib import Path

KEPT_OF_A_LINE, KEPT_OF_STDERR, KEPT_OF_THE_END, KEPT_OF_A_BREACH = 200, 8 * 1024, 500, 300
BEFORE_THE_CUT = 15  # characters of the secret before a cut that keeps the start, 25 after one that keeps the end

secret, mode = os.environ["LEAK"], sys.argv[1]
if mode == "server-line":
    for _ in sys.stdin:
        print("y" * (KEPT_OF_A_LINE - BEFORE_THE_CUT) + secret + " and the rest", flush=True)
if mode == "server-stderr":
    print("s" * (KEPT_OF_STDERR - BEFORE_THE_CUT) + secret + " and the rest", file=sys.stderr, flush=True)
    server = str(Path(__file__).with_name("faulty_server.py"))
    os.execv(sys.executable, [sys.executable, server, "fine"])
if mode == "verifier":
    kept = len(secret) - BEFORE_THE_CUT
    sys.stderr.write("the verifier failed: " + secret + "z" * (KEPT_OF_THE_END - kept - 1) + "\n")
    sys.exit(1)
if mode == "verifier-limit":
    sign = " MemoryError"
    kept = len(secret) - BEFORE_THE_CUT
    sys.stderr.write("the verifier failed: " + secret + "z" * (KEPT_OF_A_BREACH - kept - len(sign)) + sign + "\n")
    sys.exit(1)
if mode == "server-answer":  # pydantic quotes the first and last 24 characters of an input it refuses
    for raw in sys.stdin:
        message = json.loads(raw)
        if "id" not in message:
            continue
        if message["method"] == "initialize":
            info = {"name": "cut", "version": "1"}
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {}, "serverInfo": info}
        else:
            result = {"tools": [{"name": "poke", "inputSchema": "y" * 100 + secret}]}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
