"""A command agent for the Node MCP servers: calls the tools of its scenario (argv[1]) with arguments, then finishes.

everything: get-sum, echo, and the tools whose results are not plain text (an image, resource links, an embedded
resource, structured content); memory: creates an entity, adds an observation to it and reads the graph back.
It finishes with the observations it read, one line each, so a test can see what the agent was handed.
"""

import json
import sys
from typing import Any

CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "everything": [
        ("get-sum", {"a": 3, "b": 4}),
        ("echo", {"message": "hello from the agent"}),
        ("get-tiny-image", {}),
        ("get-resource-links", {"count": 2}),
        ("get-resource-reference", {"resourceType": "Text", "resourceId": 3}),
        ("get-structured-content", {"location": "New York"}),
    ],
    "memory": [
        (
            "create_entities",
            {"entities": [{"name": "AgentForge", "entityType": "project", "observations": ["evaluates agents"]}]},
        ),
        ("add_observations", {"observations": [{"entityName": "AgentForge", "contents": ["runs in a sandbox"]}]}),
        ("read_graph", {}),
    ],
}

task = json.loads(sys.stdin.readline())
seen = []
for tool, args in CALLS[sys.argv[1]]:
    print(json.dumps({"tool": tool, "args": args}), flush=True)
    seen.append(json.loads(sys.stdin.readline())["observation"])
print(json.dumps({"finish": True, "summary": json.dumps(seen)}), flush=True)
