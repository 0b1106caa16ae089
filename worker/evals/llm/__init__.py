"""Calls to models: the litellm client, provider processes, cache, cost."""
