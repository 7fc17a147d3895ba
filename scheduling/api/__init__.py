"""The REST API under /api/v1/: the same rules and services as the pages."""
