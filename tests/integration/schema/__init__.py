"""Tests: schema."""
