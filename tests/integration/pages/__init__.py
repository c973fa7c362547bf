"""Tests: pages."""
