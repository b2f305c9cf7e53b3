"""What the API and the workers share: the protocol contract (errors, limits, models, envelopes, Redis keys), the
queues of work and their scripts, settings, the version, and what every layer agrees on about a checkpoint (its
files, configuration, dimensions and named presets).

The layers depend one way (tests/test_layering.py): this package is below them all, imports no project code and
no third-party package, so the API can use it without torch.
"""
