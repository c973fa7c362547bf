"""Tests: catalog."""
