"""Call wrappers for litellm and OpenAI-SDK clients: the only place that knows their types."""
