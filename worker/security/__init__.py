"""Confine and keep secret: sandbox, Landlock, redaction, encryption."""
