"""The built-in admin-console as an MCP server over stdio: `python -m worker.environments.mcp_admin_console`.

The world comes from AGENTFORGE_WORLD_SEED; the server's instructions carry the
task (and, after a marker line, the same facts as JSON for scripted agents);
the `score` tool is the verifier, returning the stage_* values and a failure
category as JSON.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer

from domain.specs import admin_console_params
from worker.environments.admin_console import AdminConsole
from worker.environments.base import ToolError

TASK_DATA_MARKER = "AGENTFORGE_TASK_DATA:"


def build_server(world_seed: int, params: dict | None = None) -> MCPServer:
    """An MCP server around one admin-console world."""
    console = AdminConsole(admin_console_params(params or {}))
    task = console.reset(world_seed)
    server = MCPServer(
        "admin-console",
        instructions=f"{task.text}\n\n{TASK_DATA_MARKER} {json.dumps({**task.data, 'environment': console.name})}",
    )

    def call(tool: str, **args: object) -> str:
        try:
            return console.run_tool(tool, args)
        except ToolError as error:
            return f"error: {error}"

    @server.tool()
    def list_inventory() -> str:
        """List every SKU with its name and units in stock."""
        return call("list_inventory")

    @server.tool()
    def list_customers() -> str:
        """List every customer id and name."""
        return call("list_customers")

    @server.tool()
    def restock(sku: str, quantity: int) -> str:
        """Add units to a SKU's stock."""
        return call("restock", sku=sku, quantity=quantity)

    @server.tool()
    def create_order(customer_id: str, sku: str, quantity: int) -> str:
        """Create a draft order of a SKU for a customer."""
        return call("create_order", customer_id=customer_id, sku=sku, quantity=quantity)

    @server.tool()
    def checkout(order_id: str) -> str:
        """Place a draft order; needs enough stock."""
        return call("checkout", order_id=order_id)

    @server.tool()
    def score() -> str:
        """Verifier: the stage_* values of the current state and, when not all pass, the failure category."""
        stages = console.score()
        passed = all(value == 1 for value in stages.values())
        return json.dumps(
            {
                **stages,
                "failure_category": None if passed else console.diagnose(),
                "log": "\n".join(str(line) for line in console.log),  # its own notes, all text
                "explanations": console.explain(),
            }
        )

    return server


if __name__ == "__main__":
    build_server(
        int(os.environ.get("AGENTFORGE_WORLD_SEED", "0")), json.loads(os.environ.get("AGENTFORGE_PARAMS", "{}"))
    ).run("stdio")
