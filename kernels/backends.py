"""How each op's front end chooses its implementation: ``auto`` (by the tensors' device and
whether gradients flow), or one forced by name (the tests force the kernels)."""

TRITON_BACKENDS = ("auto", "torch", "triton")  # ops with a Triton kernel
NATIVE_BACKENDS = ("auto", "native", "torch")  # ops with a C kernel for the CPU trainer


def check_backend(backend: str, allowed: tuple[str, ...] = TRITON_BACKENDS) -> None:
    if backend not in allowed:
        raise ValueError(f"backend must be one of {allowed}, got {backend!r}")
