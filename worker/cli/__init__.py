"""The llmgate command: run, serve, worker, demo, setup, healthcheck, calibrate."""
