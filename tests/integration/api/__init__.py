"""Tests: api."""
