"""Tests: sandbox."""
