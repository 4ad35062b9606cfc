"""C kernels for the CPU trainer, compiled on first use (``build``) and loaded with ctypes."""
