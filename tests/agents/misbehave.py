"""A command agent that misbehaves on purpose: misbehave.py MODE (crash, hang, garbage, flood, quit, …)."""

import json
import sys
import time

mode = sys.argv[1]
task = json.loads(sys.stdin.readline())
if mode == "wrong-quantity":  # real steps, then a wrong restock: a failed trial with a trajectory
    data = task["data"]
    for action in (
        {"tool": "list_inventory", "args": {}},
        {"tool": "restock", "args": {"sku": data["sku"], "quantity": data["restock"] + 1}},
    ):
        time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)
        print(json.dumps(action), flush=True)
        sys.stdin.readline()
    print(json.dumps({"finish": True, "summary": "restocked"}), flush=True)
    sys.exit(0)
if mode == "not-a-number":  # what Python's json.dumps prints for float("nan") and float("inf"): not JSON
    print('{"tool": "list_inventory", "args": {"limit": NaN, "offset": -Infinity}, "message": "limit?"}')
    sys.stdout.flush()
    sys.stdin.readline()
    print(json.dumps({"finish": True, "summary": "done"}), flush=True)
    sys.exit(0)
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
