"""The Celery shell around one engine: `laya-worker` takes work from Redis in class order and answers it."""
