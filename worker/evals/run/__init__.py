"""Run the targets on every example: commands, batches, model targets."""
