"""The (rows, tokens per row) shapes the cuda executor launches, for the kernel tests and timings.

Rows are padded to L tokens, so every kernel sees M = R * L token rows. The executor admits 1 to 16
rows of up to 512 tokens (16 tokens minimum); these cover the corners, the one-question inputs,
a length that is no multiple of any tile (77), and both sides of the GEMMs' small-M tier (M = 128).
"""

ROWS = (1, 2, 3, 5, 8, 16)
TOKENS = (16, 64, 77, 128, 192, 512)
SHAPES = tuple((r, t) for r in ROWS for t in TOKENS)

# A smaller set for timings: the DESIGN's five benchmark inputs, padded, plus the corners.
TIMED_SHAPES = ((1, 16), (1, 80), (3, 192), (1, 416), (5, 512), (16, 512), (16, 16))
