"""An MCP server that fails on purpose: faulty_server.py nostart|die|slow|garbage|fine."""

import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

mode = sys.argv[1]
if mode == "garbage":  # answers every message with something that is not JSON-RPC
    for _ in sys.stdin:
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    sys.exit(0)
if mode == "nostart":
    print("cannot start: missing configuration", file=sys.stderr, flush=True)
    sys.exit(2)

server = MCPServer("faulty", instructions="Poke the server once.")
poked = []


@server.tool()
def poke() -> str:
    """Poke the server."""
    if mode == "die":
        print("server crashed while poking", file=sys.stderr, flush=True)
        os._exit(3)
    if mode == "slow":
        time.sleep(30)
    poked.append(1)
    return "poked"


@server.tool()
def score() -> str:
    """Verifier."""
    return json.dumps({"stage_poked": 1.0 if poked else 0.0})


server.run("stdio")
