"""The llmgate command: run, serve, worker, demo, setup, healthcheck, calibrate.

Face: empty: no other package imports anything of this one (tests/test_faces.py).
"""

__all__: list[str] = []
