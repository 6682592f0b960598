"""Benchmarks of the replicator (run from the repository root; see bench/README.md)."""
