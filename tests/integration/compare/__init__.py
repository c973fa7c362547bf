"""Tests: compare."""
