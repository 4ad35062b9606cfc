"""The precisions a model trains in: fp32, bf16 mixed precision, or fp8 (bf16 mixed
precision with every GEMM site's forward in row-wise FP8; ``workers.train``).

A module of its own so that the search config can name them without importing torch."""

TRAIN_PRECISIONS = ("fp32", "bf16", "fp8")
