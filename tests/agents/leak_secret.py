"""A command agent that prints its secrets everywhere it can: stderr, a tool argument, its finish summary."""

import hashlib
import json
import os
import sys

secret, quoted = os.environ["AGENT_API_KEY"], os.environ["AGENT_QUOTED"]
task = json.loads(sys.stdin.readline())
print(f"starting with key {secret} and {quoted}", file=sys.stderr, flush=True)
print("sha256 of the key " + hashlib.sha256(secret.encode()).hexdigest(), file=sys.stderr, flush=True)
print("key reversed " + secret[::-1], file=sys.stderr, flush=True)  # a transformed secret is not masked
for sku in (secret, quoted):  # the admin console answers `no SKU '<sku>'`: the secret comes back as observation
    print(json.dumps({"tool": "restock", "args": {"sku": sku, "quantity": 1}}), flush=True)
    sys.stdin.readline()
print(json.dumps({"finish": True, "summary": f"done; the key was {secret}"}), flush=True)
sys.stdin.readline()
