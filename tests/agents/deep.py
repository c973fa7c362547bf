"""A command agent that nests its JSON deep on purpose: deep.py WHERE DEPTH.

WHERE is `line` (a tool call whose line nests DEPTH levels, through its arguments) or `args-text` (the same
call's arguments given as JSON text nesting DEPTH levels). It then finishes.
"""

import json
import sys

where, depth = sys.argv[1], int(sys.argv[2])
task = json.loads(sys.stdin.readline())
tool = task["tools"][0]["name"]
if where == "line":  # {"tool", "args": {"a": […]}}: the line, args, then depth - 2 levels of arrays
    inner = "[" * (depth - 2) + "]" * (depth - 2)
    print(f'{{"tool": "{tool}", "args": {{"a": {inner}}}}}', flush=True)
else:  # the arguments' text {"a": […]} nests depth levels
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    print(json.dumps({"tool": tool, "args": f'{{"a": {inner}}}'}), flush=True)
sys.stdin.readline()
print(json.dumps({"finish": True, "summary": "done"}), flush=True)
