"""Triton kernels beside their PyTorch references (``ikbo``: the IKBO broadcast linear), and
the cost model (``cost``: GEMM records, hardware targets, the roofline, the FP8 probe).
"""
