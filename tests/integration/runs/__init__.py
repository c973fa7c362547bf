"""Tests: runs."""
