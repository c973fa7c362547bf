"""Importers: trials that ran elsewhere become runs, trials and rollouts here (NDJSON ingest, Harbor jobs)."""
