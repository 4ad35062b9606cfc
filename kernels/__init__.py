"""Triton kernels beside their PyTorch references (``ikbo``: the IKBO broadcast linear;
``fp8_linear``: the FP8 row-wise linear; ``hstu_attention``: HSTU attention), a C kernel
beside its PyTorch reference for the CPU trainer (``rowwise_adam``: the embeddings' lazy
Adam step; ``_native`` builds and loads it), and the cost model (``cost``: GEMM records,
hardware targets, the roofline, the FP8 probe).
"""
