"""A hostile command agent: `agent.py attack|forkbomb|memory|filesize|output|cpu`.

`attack` runs every attack of attacks.py, reports on stderr, calls the first tool and finishes with the
report as its summary; the other modes each go past one sandbox limit.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from attacks import report

mode = sys.argv[1]
task = json.loads(sys.stdin.readline())
if mode == "attack":
    text = report("agent")
    print(text, file=sys.stderr, flush=True)
    print(json.dumps({"tool": task["tools"][0]["name"], "args": {}}), flush=True)
    sys.stdin.readline()
    print(json.dumps({"finish": True, "summary": "attacks done"}), flush=True)
elif mode == "forkbomb":
    children = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
            children += 1
    except OSError as error:
        print(f"fork bomb stopped after {children} processes: {error}", file=sys.stderr, flush=True)
        sys.exit(1)
elif mode == "memory":
    hoard = bytearray(8 * 1024**3)
elif mode == "filesize":
    with open("big.bin", "wb") as handle:
        for _ in range(64):
            handle.write(b"x" * 1024 * 1024)
elif mode == "output":
    while True:
        sys.stderr.write("flood " * 10000 + "\n")
elif mode == "cpu":
    while True:
        pass
print(json.dumps({"finish": True}), flush=True)
