"""Benchmarks: data generator and measurements written to BENCHMARKS.md."""
