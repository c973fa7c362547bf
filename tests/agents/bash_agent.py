"""A command agent driving a Harbor task's `bash` tool: runs each command of its command line in order, then
finishes with what each printed (a JSON list), so a test can see what the agent saw."""

import json
import sys

task = json.loads(sys.stdin.readline())
seen = []
for command in sys.argv[1:]:
    print(json.dumps({"tool": "bash", "args": {"command": command}}), flush=True)
    seen.append(json.loads(sys.stdin.readline())["observation"])
print(json.dumps({"finish": True, "summary": json.dumps(seen)}), flush=True)
