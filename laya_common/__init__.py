"""What every layer agrees on about a model checkpoint: its files, configuration, dimensions and named presets.

The layers depend one way (app -> worker -> bundle -> kernels, tests/test_layering.py): this package is
below them all, imports no project code and no third-party package, so the API can use it without torch.
"""
