"""A command agent that reads its task and finishes at once: the benchmark's measure of start-up alone."""

import json
import sys

sys.stdin.readline()
print(json.dumps({"finish": True}), flush=True)
