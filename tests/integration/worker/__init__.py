"""Tests: worker."""
