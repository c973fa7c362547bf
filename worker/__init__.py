"""Evaluation worker: claims queued runs and records their trials (built in the worker issue)."""
