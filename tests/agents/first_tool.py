"""A command agent that calls the first tool it is given, once, with no arguments, then finishes."""

import json
import sys

task = json.loads(sys.stdin.readline())
print(json.dumps({"tool": task["tools"][0]["name"], "args": {}}), flush=True)
sys.stdin.readline()
print(json.dumps({"finish": True}), flush=True)
