"""One candidate trained by several processes at once (data parallel), with
``torch.distributed``: gloo on CPUs, NCCL on GPUs.

Each step's global batch (``TrainConfig.batch_size``, the same rows a single process would
take) is cut into one equal slice per process. After the backward pass:

- dense gradients are summed across processes (all-reduce) and divided by their number;
- an embedding table's gradient is sparse (only the rows its slice looked up): each
  process's rows and values are gathered by every process (all-gather), and the
  concatenation, divided by the number of processes, is the gradient of the global batch
  (the optimizer sums repeated rows, as it does within one batch). All-reducing the whole
  table instead would move every row of it, every step.

Every process then holds the same gradients and takes the same optimizer step, so their
weights stay equal, and equal to one process's training on the global batch to float
rounding (``tests/test_data_parallel.py``). We reduce by hand rather than wrap the model in
``DistributedDataParallel``: DDP all-reduces sparse gradients as sparse tensors only on
gloo, and buckets nothing for them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from nas.core.errors import ConfigError, NasError
from nas.core.processes import end_with_parent

# How long a rank waits for the others, to join the group or at a step's reduction (gloo's
# default is 30 minutes). A rank whose worker died mid-training ends the others' wait at
# once (its sockets close); one that died before joining, or hangs, ends it after this.
GROUP_TIMEOUT = timedelta(minutes=5)


def world() -> tuple[int, int]:
    """(this process's rank, the number of processes) of the process group; (0, 1) alone."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def check_batch(batch_size: int, processes: int) -> None:
    if batch_size % processes:
        raise ConfigError(
            "batch_size",
            f"{batch_size} rows a step do not split evenly over {processes} processes; "
            f"use a multiple of {processes}",
        )


def my_rows(rows: torch.Tensor) -> torch.Tensor:
    """This process's slice of a step's global batch (contiguous, equal slices)."""
    rank, size = world()
    if size == 1:
        return rows
    share = len(rows) // size
    return rows[rank * share : (rank + 1) * share]


def mean_across(value: torch.Tensor) -> torch.Tensor:
    """``value`` averaged over the processes (itself alone)."""
    _, size = world()
    if size == 1:
        return value
    value = value.detach().clone()
    dist.all_reduce(value)
    return value / size


def reduce_gradients(model: nn.Module) -> None:
    """Every process's gradients -> the global batch's, on every process (see the module
    docstring). Each process must call it after each backward pass."""
    _, size = world()
    if size == 1:
        return
    for param in model.parameters():
        grad = param.grad
        if grad is None:  # the same parameters go unused on every process (one spec)
            continue
        if grad.is_sparse:
            param.grad = _gathered(grad, size)
        else:
            dist.all_reduce(grad)
            grad.div_(size)


def _gathered(grad: torch.Tensor, size: int) -> torch.Tensor:
    """A sparse gradient's rows and values from every process, concatenated, / ``size``."""
    ids, values = grad._indices()[0], grad._values()
    counts = [torch.zeros(1, dtype=torch.int64, device=ids.device) for _ in range(size)]
    dist.all_gather(counts, torch.tensor([len(ids)], device=ids.device))
    longest = int(max(c.item() for c in counts))
    padded_ids = ids.new_zeros(longest)
    padded_ids[: len(ids)] = ids
    padded_values = values.new_zeros((longest, *values.shape[1:]))
    padded_values[: len(ids)] = values
    all_ids = [torch.empty_like(padded_ids) for _ in range(size)]
    all_values = [torch.empty_like(padded_values) for _ in range(size)]
    dist.all_gather(all_ids, padded_ids)
    dist.all_gather(all_values, padded_values)
    kept = [int(c.item()) for c in counts]
    rows = torch.cat([i[:n] for i, n in zip(all_ids, kept, strict=True)])
    summed = torch.cat([v[:n] for v, n in zip(all_values, kept, strict=True)]) / size
    return torch.sparse_coo_tensor(rows.unsqueeze(0), summed, grad.shape, check_invariants=False)


def run_processes(
    processes: int, target: Callable[..., Any], args: tuple, threads: int = 1
) -> list[Any]:
    """``target(*args)`` in ``processes`` processes of one gloo process group on this machine
    (each with ``threads`` torch threads); what each returned, by rank. A process that
    raises ends them all; a ``NasError`` it raised is raised here with its message."""
    from multiprocessing.managers import SyncManager

    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessException

    port = free_port("127.0.0.1")
    parent = os.getpid()
    manager = SyncManager(ctx=mp.get_context("spawn"))
    # Its processes end with this one, even killed by SIGKILL (a `nas train --workers 2`
    # killed so left both ranks training and the manager waiting, for good).
    manager.start(end_with_parent, (parent,))  # (a with-block alone starts it without)
    with manager:
        results = manager.dict()
        try:
            mp.start_processes(
                _process,
                args=(processes, port, threads, target, args, results, parent),
                nprocs=processes,
                start_method="spawn",
            )
        except ProcessException as err:
            failed = [results[r] for r in range(processes) if r in results]
            message = next((m for kind, m in failed if kind == "error"), None)
            raise NasError(message or f"a training process failed: {err}") from None
        return [results[rank][1] for rank in range(processes)]


def _process(rank, processes, port, threads, target, args, results, parent) -> None:
    end_with_parent(parent)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=processes, timeout=GROUP_TIMEOUT)
    try:
        results[rank] = ("done", target(*args))
    except NasError as err:  # the message travels; the process still fails (ending the rest)
        results[rank] = ("error", str(err))
        raise
    finally:
        dist.destroy_process_group()


def free_port(host: str = "") -> int:
    """A TCP port free on ``host`` (every interface by default) for a group's rendezvous."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
