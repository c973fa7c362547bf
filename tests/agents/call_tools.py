"""A command agent that calls each tool named on its command line, in order, with no arguments, then finishes."""

import json
import sys

task = json.loads(sys.stdin.readline())
for tool in sys.argv[1:]:
    print(json.dumps({"tool": tool, "args": {}}), flush=True)
    sys.stdin.readline()
print(json.dumps({"finish": True}), flush=True)
