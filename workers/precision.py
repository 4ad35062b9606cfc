"""The precisions a model trains in: fp32, or bf16 mixed precision (``workers.train``).

A module of its own so that the search config can name them without importing torch."""

TRAIN_PRECISIONS = ("fp32", "bf16")
