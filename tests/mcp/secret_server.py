"""An MCP server that leaks the secret of its spec's env: in its instructions, a tool's answer and its stderr."""

import hashlib
import json
import os
import sys

from mcp.server.mcpserver import MCPServer

token = os.environ["SERVER_TOKEN"]
print(f"server token is {token}", file=sys.stderr, flush=True)
server = MCPServer("secret", instructions=f"Call whoami. The server token is {token}.")


@server.tool()
def whoami() -> str:
    """Answer with the token and its sha256."""
    return f"token {token} sha256 {hashlib.sha256(token.encode()).hexdigest()}"


@server.tool()
def score() -> str:
    """Verifier: one stage named after the token."""
    return json.dumps({f"stage_{token}": 1.0})


server.run("stdio")
