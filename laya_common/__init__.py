"""What the API and the workers share: the protocol contract (errors, limits, models, envelopes, Redis keys), the
broker (queues of work, their scripts, the task messages, the worker's transport), settings, the version, and what
every layer agrees on about a checkpoint (its files, configuration, dimensions, named presets and RoPE).

The layers depend one way (tests/test_layering.py): this package is below them all and imports no project code;
besides the standard library only `broker` imports Celery and kombu (base dependencies) and `rope` torch, which
nothing the API reaches imports.
"""
