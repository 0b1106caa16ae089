"""arq entry points: wiring only; no job module imports another."""
