"""Lazy (row-wise) Adam for sparse embedding gradients: only the rows a batch looked up move,
and their moments, as ``torch.optim.SparseAdam`` moves them. The optimizer around it is
``workers.optimizers.RowwiseAdam``; this is its step over one buffer of tables.

    g_r = the summed gradient of row r (its repeated ids added up)
    m_r <- beta1 m_r + (1 - beta1) g_r,   v_r <- beta2 v_r + (1 - beta2) g_r^2
    w_r <- w_r - lr sqrt(1 - beta2^t) / (1 - beta1^t) m_r / (sqrt(v_r) + eps)

``weights``, ``exp_avg``, ``exp_avg_sq`` [R, D]: tables laid one after another in one
buffer; ``parts``: each stepped table's first row in it and its sparse gradient (rows
relative to the table, uncoalesced, as ``nn.Embedding(sparse=True)`` gives it).

``step_rows`` dispatches: the C kernel (``kernels/native/rowwise_adam.c``, compiled on first
use by ``kernels/native/build.py``) for float32 CPU buffers where it builds, else the
PyTorch reference (``kernels/pytorch/pt_rowwise_adam.py``). The kernel does in two passes
what the reference does in about fifteen torch ops, each over the touched rows or the whole
buffer (its speed-up: ``benchmarks/README.md``).
"""

from __future__ import annotations

import ctypes
import functools

import torch

from kernels.backends import NATIVE_BACKENDS, check_backend
from kernels.native import build
from kernels.pytorch.pt_rowwise_adam import AdamStep, Parts, reference


@functools.cache
def _kernel():
    library = build.load("rowwise_adam")
    if library is None:
        return None
    kernel = library.rowwise_adam
    pointer, whole, real = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    kernel.argtypes = [pointer] * 3 + [whole] * 2 + [pointer] * 2 + [whole] * 2
    kernel.argtypes += [pointer] * 3 + [real] * 4
    kernel.restype = whole
    return kernel


def native_available() -> bool:
    """Whether the C kernel is built here (or can be)."""
    return build.load("rowwise_adam") is not None


def slots_for(weights: torch.Tensor) -> torch.Tensor:
    """The C kernel's row map for a buffer: [R] int32, all -1 (it leaves it so)."""
    return torch.full((len(weights),), -1, dtype=torch.int32)


def _fits_kernel(weights: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor) -> bool:
    return all(
        t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous() and t.dim() == 2
        for t in (weights, exp_avg, exp_avg_sq)
    )


def native(
    weights: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    parts: Parts,
    slots: torch.Tensor,
    adam: AdamStep,
) -> None:
    """The C kernel, one call per table; ``slots`` from ``slots_for(weights)``."""
    kernel = _kernel() if build.enabled() else None
    if kernel is None:
        reason = build.status("rowwise_adam").found
        raise RuntimeError(f"the rowwise_adam kernel is not built: {reason}")
    if not _fits_kernel(weights, exp_avg, exp_avg_sq) or slots.shape != (len(weights),):
        raise ValueError("the kernel takes contiguous [R, D] float32 CPU buffers and [R] slots")
    dim = weights.shape[1]
    size, (beta1, beta2), step_size = weights.element_size(), adam.betas, adam.step_size
    for start, grad in parts:
        ids, values = grad._indices()[0], grad._values()  # float32 [nnz, D], as the table
        if values.stride(1) != 1:
            values = values.contiguous()
        count = len(ids)
        scratch = torch.empty((count, dim))
        touched = torch.empty(count, dtype=torch.int64)
        offset = start * dim * size
        done = kernel(
            weights.data_ptr() + offset,
            exp_avg.data_ptr() + offset,
            exp_avg_sq.data_ptr() + offset,
            grad.shape[0],
            dim,
            ids.data_ptr(),
            values.data_ptr(),
            values.stride(0),
            count,
            slots.data_ptr() + start * slots.element_size(),
            scratch.data_ptr(),
            touched.data_ptr(),
            1 - beta1,
            1 - beta2,
            adam.eps,
            step_size,
        )
        if done < 0:
            raise IndexError(f"a sparse gradient names a row outside its {grad.shape[0]} rows")


def step_rows(
    weights: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    parts: Parts,
    adam: AdamStep,
    *,
    slots: torch.Tensor | None = None,
    dense_below: float = 8.0,
    backend: str = "auto",
) -> None:
    """One lazy Adam step of the tables in ``parts``.
    ``backend="auto"``: the C kernel where it is built, ``slots`` are given and the buffers
    fit it; else the reference."""
    check_backend(backend, NATIVE_BACKENDS)
    use_native = backend == "native" or (
        backend == "auto"
        and slots is not None
        and _fits_kernel(weights, exp_avg, exp_avg_sq)
        and native_available()
    )
    if use_native:
        if slots is None:
            raise ValueError("the native backend needs slots (kernels.rowwise_adam.slots_for)")
        native(weights, exp_avg, exp_avg_sq, parts, slots, adam)
    else:
        reference(weights, exp_avg, exp_avg_sq, parts, adam, dense_below)
