"""How each op's front end chooses its implementation: ``auto`` (by the tensors' device,
whether gradients flow, and whether the model is being traced), or one forced by name (the
tests force the kernels)."""

import torch

TRITON_BACKENDS = ("auto", "torch", "triton")  # ops with a Triton kernel
NATIVE_BACKENDS = ("auto", "native", "torch")  # ops with a C kernel for the CPU trainer


def triton_chosen(backend: str, tensor: torch.Tensor) -> bool:
    """Whether an op with a Triton kernel runs it: forced, or ``auto`` on a CUDA tensor. Not
    while the model is traced (fvcore's FLOP count): the trace records the reference's ops,
    which it can count where a kernel is opaque, and shapes there may be traced tensors,
    which a kernel's integer arguments cannot take."""
    check_backend(backend)
    if backend != "auto":
        return backend == "triton"
    return tensor.is_cuda and not torch.jit.is_tracing()


def check_backend(backend: str, allowed: tuple[str, ...] = TRITON_BACKENDS) -> None:
    if backend not in allowed:
        raise ValueError(f"backend must be one of {allowed}, got {backend!r}")
