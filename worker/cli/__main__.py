"""``python -m worker.cli``: the llmgate command (its exit status is main's)."""

from worker.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
