"""A command agent that solves admin-console and support-desk from the task data (JSON lines protocol)."""

import json
import re
import sys


def plan(data):
    if data["environment"] == "admin-console":
        yield {"tool": "restock", "args": {"sku": data["sku"], "quantity": data["restock"]}}
        yield {
            "tool": "create_order",
            "args": {"customer_id": data["customer_id"], "sku": data["sku"], "quantity": data["quantity"]},
        }
        yield {"tool": "checkout", "args": {"order_id": "ORDER"}}
    else:
        ticket = data["ticket_id"]
        yield {"tool": "set_priority", "args": {"ticket_id": ticket, "priority": data["priority"]}}
        yield {"tool": "assign", "args": {"ticket_id": ticket, "team": data["team"]}}
        yield {"tool": "reply", "args": {"ticket_id": ticket, "message": f"Reference {data['reference']}."}}


def main():
    task = json.loads(sys.stdin.readline())
    order = None
    for action in plan(task["data"]):
        if action["args"].get("order_id") == "ORDER":
            action["args"]["order_id"] = order
        print(json.dumps(action), flush=True)
        observation = json.loads(sys.stdin.readline())["observation"]
        found = re.search(r"ORD-\d+", observation)
        order = found.group(0) if found else order
    print(json.dumps({"finish": True, "summary": "solved"}), flush=True)


main()
