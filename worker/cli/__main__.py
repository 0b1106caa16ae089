"""``python -m worker.cli``: the llmgate command (its exit status is the entry point's)."""

from worker.cli.entry import console

if __name__ == "__main__":
    console()
