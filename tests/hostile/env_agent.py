"""A command agent that reports what it sees (its environment, cwd and workspace files) as its finish summary."""

import json
import os
import sys

sys.stdin.readline()
with open("note.txt", "w") as note:
    note.write("kept for the trial only")
seen = {"env": dict(os.environ), "cwd": os.getcwd(), "files": os.listdir(".")}
print(json.dumps({"finish": True, "summary": json.dumps(seen)}), flush=True)
