"""Render a gate report for GitHub and the CLI (pure but store.py)."""
