"""An MCP server that fails on purpose.

faulty_server.py nostart|mute|sluggish|die|slow|garbage|fine|parts|snag|structured.

mute never answers; sluggish takes 2 s to start, then serves; parts answers poke with text, an image and text;
snag answers poke with an isError result; structured answers it with structuredContent.
"""

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mode = sys.argv[1]
if mode == "mute":  # started, but never answers a message
    time.sleep(120)
if mode == "sluggish":
    time.sleep(2)
if mode == "garbage":  # answers every message with something that is not JSON-RPC
    for _ in sys.stdin:
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    sys.exit(0)
if mode == "nostart":
    print("cannot start: missing configuration", file=sys.stderr, flush=True)
    sys.exit(2)

server = MCPServer("faulty", instructions="Poke the server once.")
poked: list[int] = []
scored: list[int] = []  # every call of the verifier tool the server received


PIXEL = bytes.fromhex("89504e470d0a1a0a")  # the PNG signature: enough to be an image part


def poke() -> Any:
    """Poke the server."""
    if mode == "die":
        print("server crashed while poking", file=sys.stderr, flush=True)
        os._exit(3)
    if mode == "slow":
        time.sleep(30)
    poked.append(1)
    if mode == "snag":
        raise ToolError("the snag held")
    if mode == "parts":
        return ["before the picture", Image(data=PIXEL, format="png"), "after the picture"]
    return "poked"


def poke_counted() -> dict[str, Any]:
    """Poke the server (it answers with structuredContent beside its text)."""
    poked.append(1)
    return {"pokes": len(poked), "unit": "poke"}


if mode == "structured":
    server.tool(name="poke", structured_output=True)(poke_counted)
else:
    server.tool(structured_output=False)(poke)


@server.tool()
def score(weight: float = 1.0) -> str:
    """Verifier (the spec may pass a weight); its explanation says how often it was called, and it claims words on
    how the reward was derived, which are the worker's to say."""
    scored.append(1)
    said = f"poked {len(poked)} times; the verifier was called {len(scored)} times"
    claimed = "reward.json's reward"
    return json.dumps(
        {"stage_poked": weight if poked else 0.0, "explanations": {"stage_poked": said, "reward": claimed}}
    )


server.run("stdio")
