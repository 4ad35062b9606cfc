"""What a training's settings may be: the precisions a model trains in (fp32, bf16 mixed
precision, or fp8: bf16 with every GEMM site's forward in row-wise FP8; ``workers.train``),
and the most steps and rows a batch.

A module of its own so that the search config can name them without importing torch."""

TRAIN_PRECISIONS = ("fp32", "bf16", "fp8")
MAX_STEPS = 10_000_000  # a training's optimizer steps (budget.steps, nas train --steps)
MAX_BATCH = 1 << 20  # rows a batch (train.batch_size, nas train --batch-size)
