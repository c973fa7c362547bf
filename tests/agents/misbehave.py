"""A command agent that misbehaves on purpose: python misbehave.py crash|hang|garbage|flood|quit|stderr-flood."""

import json
import sys
import time

mode = sys.argv[1]
sys.stdin.readline()  # the task
if mode == "crash":
    print("Traceback: something broke inside the agent", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(3600)
if mode == "garbage":
    print("this is not json", flush=True)
if mode == "flood":
    sys.stdout.write("x" * 1_000_000)
    sys.stdout.flush()
    time.sleep(3600)
if mode == "stderr-flood":
    sys.stderr.write("noise " * 200_000)
    sys.stderr.flush()
if mode in ("quit", "stderr-flood"):
    print(json.dumps({"finish": True, "summary": "nothing to do"}), flush=True)
    sys.stdin.readline()
