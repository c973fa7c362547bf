"""Tests: integration."""
