"""FileDB backends: ``memory`` (a fake for tests) and ``sqlite`` (the embedded default)."""
