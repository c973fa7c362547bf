"""Where the suite's files are, for test modules at any depth under tests/ (unit/, integration/<area>/, browser/)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
"""tests/: the shared helpers (agents/, hostile/, mcp/, fixtures/, vendor/, openai_server.py)."""
ROOT = TESTS.parent
"""The checkout."""
