"""Tests: importers."""
