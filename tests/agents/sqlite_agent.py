"""A command agent for the mcp-server-sqlite environment: makes a table of SKUs, fills it, reads it back.

It finishes with what the reads answered (one observation per line), so a test can compare it with the database.
"""

import json
import sys

task = json.loads(sys.stdin.readline())


def call(tool: str, **args: object) -> str:
    print(json.dumps({"tool": tool, "args": args}), flush=True)
    return str(json.loads(sys.stdin.readline())["observation"])


call("create_table", query="CREATE TABLE skus (sku TEXT PRIMARY KEY, stock INTEGER NOT NULL)")
call("write_query", query="INSERT INTO skus VALUES ('SKU-1', 12), ('SKU-2', 0)")
call("write_query", query="UPDATE skus SET stock = stock + 5 WHERE sku = 'SKU-2'")
read = call("read_query", query="SELECT sku, stock FROM skus ORDER BY sku")
tables = call("list_tables")
print(json.dumps({"finish": True, "summary": json.dumps({"read": read, "tables": tables})}), flush=True)
