"""The ops, each laid out as Meta's generative-recommenders lays out its own:

    kernels/<op>.py          the front end: one function per op that dispatches
    kernels/pytorch/pt_*.py  the PyTorch reference (CPU, training, what the kernels are
                             tested against)
    kernels/triton/triton_*.py  the Triton kernel (CUDA; CPU under TRITON_INTERPRET=1)
    kernels/native/*.c       a C kernel for the CPU trainer (``native/build.py`` compiles it)

Ops: ``ikbo`` (IKBO broadcast linear), ``fp8_linear`` (FP8 row-wise linear),
``hstu_attention`` (HSTU attention) and ``rowwise_adam`` (the embeddings' lazy Adam step).
Pricing a model (the cost model) lives with the architecture, ``nas.arch.cost``.
"""
