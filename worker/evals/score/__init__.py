"""Score outputs: assertions, judges and metrics."""
