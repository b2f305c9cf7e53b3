"""The decision engine and its executors: a request in, typed answers out; no Celery, no Redis (worker/__init__.py)."""
