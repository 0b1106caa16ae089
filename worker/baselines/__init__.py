"""Stored base results: the store, the keys, reuse per suite."""
