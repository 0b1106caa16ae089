"""The llmgate command: run, serve, worker, demo, setup, healthcheck, calibrate.

Face (worker/README.md's import rule 7): empty, no other package imports anything of it.
"""

__all__: list[str] = []
