"""Tests: isolation."""
