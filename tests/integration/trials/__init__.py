"""Tests: trials."""
