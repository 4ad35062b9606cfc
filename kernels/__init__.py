"""Triton kernels beside their PyTorch references, and the hardware/FP8 cost models.

Empty until the kernels land; see ARCHITECTURE.md.
"""
