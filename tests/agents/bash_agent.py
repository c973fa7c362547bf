"""A command agent driving a Harbor task's `bash` tool: runs each command of its command line in order, then
finishes with what each printed (a JSON list), so a test can see what the agent saw. An argument starting with `{`
is the call's whole arguments object as JSON (`{"command": "sleep 5", "timeoutS": 1}`)."""

import json
import sys

task = json.loads(sys.stdin.readline())
seen = []
for command in sys.argv[1:]:
    args = json.loads(command) if command.startswith("{") else {"command": command}
    print(json.dumps({"tool": "bash", "args": args}), flush=True)
    seen.append(json.loads(sys.stdin.readline())["observation"])
print(json.dumps({"finish": True, "summary": json.dumps(seen)}), flush=True)
