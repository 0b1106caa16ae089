"""Calls to models: the litellm client, the direct client, cache, cost."""
