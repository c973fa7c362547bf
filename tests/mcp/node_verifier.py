"""The verifier command of the Node MCP server environments; it reads what the real server left in the workspace.

everything: the server's own answers (its stdout, copied to transcript.jsonl by the spec's `tee`) hold the sum of
3 and 4; memory: the server's memory file (MEMORY_FILE_PATH) holds the entity with both observations.
"""

import json
import sys
from pathlib import Path


def lines(name: str) -> list[dict]:
    path = Path(name)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


if sys.argv[1] == "everything":
    answered = json.dumps(lines("transcript.jsonl"))
    print(json.dumps({"stage_summed": float("The sum of 3 and 4 is 7." in answered)}))
else:
    entity = next((e for e in lines("memory.jsonl") if e.get("name") == "AgentForge"), {})
    print(
        json.dumps(
            {
                "stage_created": float(entity.get("entityType") == "project"),
                "stage_observed": float(entity.get("observations") == ["evaluates agents", "runs in a sandbox"]),
            }
        )
    )
