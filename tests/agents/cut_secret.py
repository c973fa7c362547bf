"""A command agent that prints its secret (env LEAK) right where the worker cuts what it keeps: cut_secret.py MODE.

line: answers with a line that is not JSON, the secret across the 200 characters the log quotes of it;
stderr: prints the secret on stderr across the 8 KiB the worker keeps of it, then finishes.
"""

import json
import os
import sys

KEPT_OF_A_LINE, KEPT_OF_STDERR, BEFORE_THE_CUT = 200, 8 * 1024, 15  # 15 characters of the secret before each cut

secret, mode = os.environ["LEAK"], sys.argv[1]
task = json.loads(sys.stdin.readline())
if mode == "line":
    print("x" * (KEPT_OF_A_LINE - BEFORE_THE_CUT) + secret + " and the rest", flush=True)
if mode == "stderr":
    print("e" * (KEPT_OF_STDERR - BEFORE_THE_CUT) + secret + " and the rest", file=sys.stderr, flush=True)
    print(json.dumps({"finish": True, "summary": "done"}), flush=True)
    sys.stdin.readline()
