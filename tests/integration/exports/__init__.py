"""Tests: exports."""
