"""The Triton kernels of the ops (imported only when they run: on CUDA, or on CPU under
``TRITON_INTERPRET=1``)."""
