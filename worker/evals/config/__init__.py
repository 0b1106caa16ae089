"""Parse .llmgate.yml and the files it names (datasets, prompts)."""
