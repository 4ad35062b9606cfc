"""Triton kernels beside their PyTorch references (``ikbo``: the IKBO broadcast linear;
``fp8_linear``: the FP8 row-wise linear; ``hstu_attention``: HSTU attention), and the cost
model (``cost``: GEMM records, hardware targets, the roofline, the FP8 probe).
"""
