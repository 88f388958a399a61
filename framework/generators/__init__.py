"""Synthetic data for examples, tests and benchmarks, written as files landing in folders."""
