"""Tests: auth."""
