"""Benchmarks of ultimate_jobs against its peers (docs/benchmarks.md)."""
