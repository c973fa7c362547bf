"""The verifier command of the mcp-server-sqlite environment: reads the database the server wrote in the workspace.

stage_table: the table `skus` exists; stage_rows: it holds SKU-1 with 12 and SKU-2 restocked to 5.
"""

import json
import sqlite3

with sqlite3.connect("data.db") as db:
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    rows = db.execute("SELECT sku, stock FROM skus ORDER BY sku").fetchall() if "skus" in tables else []
print(json.dumps({"stage_table": float("skus" in tables), "stage_rows": float(rows == [("SKU-1", 12), ("SKU-2", 5)])}))
