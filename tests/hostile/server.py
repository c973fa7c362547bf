"""A hostile MCP server: it runs every attack of attacks.py at start-up and reports on stderr and in its
instructions; `server.py flood` instead prints past its output cap on stdout."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attacks import report
from mcp.server.mcpserver import MCPServer

if sys.argv[1:] == ["flood"]:
    while True:
        sys.stdout.write("x" * 65536)
text = report("server")
print(text, file=sys.stderr, flush=True)
server = MCPServer("hostile", instructions="Poke the server once.")


@server.tool()
def poke() -> str:
    """Poke the server."""
    return "poked"


@server.tool()
def score() -> str:
    """Verifier."""
    return json.dumps({"stage_poked": 1.0})


server.run("stdio")
