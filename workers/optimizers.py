"""The optimizers that train candidates: AdamW for dense weights, lazy Adam for embedding
tables (``RowwiseAdam``), Adam for DNAS's architecture logits.

Written without ``torch.optim.Optimizer``: each of its methods (the constructor, ``step``,
``zero_grad``, ``state_dict``) imports ``torch._dynamo`` on its first call, and that import
cost every process that trains (a search's trial worker, a setup job, ``nas train``) about 3 s
of CPU before its first step on 2 cores (``python -c "import torch"``: 2.8 s of CPU;
``"import torch, torch._dynamo"``: 5.5-6.5 s). Nothing else on the training path imports it
(``tests/test_optimizers.py`` checks). What torch's classes do is kept:

- the update: ``AdamW`` runs the kernel ``torch.optim.AdamW(fused=True)`` runs
  (``torch._fused_adamw_``), ``Adam`` the arithmetic of ``torch.optim.Adam``'s single-tensor
  path (its default on the CPU), so the weights are torch's to the bit
  (``tests/test_optimizers.py``);
- ``param_groups`` (a schedule sets each group's ``lr``), ``state`` per parameter, and the
  ``state_dict`` layout: checkpoints written by either load in the other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import torch

from kernels import rowwise_adam
from kernels.backends import NATIVE_BACKENDS, check_backend


class ParamOptimizer:
    """Parameter groups, per-parameter state and torch's ``state_dict`` layout; a subclass
    adds ``step``. ``params``: tensors, or dicts of ``params`` and per-group settings."""

    def __init__(self, params: Iterable, defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("an optimizer needs at least one parameter")
        for group in groups if isinstance(groups[0], dict) else [{"params": groups}]:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        params = group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        self.param_groups.append({**self.defaults, **group, "params": params})

    def zero_grad(self) -> None:
        """Drop every parameter's gradient (torch's ``zero_grad(set_to_none=True)``)."""
        for group in self.param_groups:
            for param in group["params"]:
                param.grad = None

    def state_dict(self) -> dict[str, Any]:
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            for param in group["params"]:
                index.setdefault(id(param), len(index))
            packed = {k: v for k, v in group.items() if k != "params"}
            groups.append(packed | {"params": [index[id(p)] for p in group["params"]]})
        state = {index[id(param)]: values for param, values in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict["param_groups"]
        if [len(g["params"]) for g in saved] != [len(g["params"]) for g in self.param_groups]:
            raise ValueError(
                "the saved optimizer state has groups of "
                f"{[len(g['params']) for g in saved]} parameters, this optimizer "
                f"{[len(g['params']) for g in self.param_groups]}"
            )
        by_index = {
            i: param
            for old, group in zip(saved, self.param_groups, strict=True)
            for i, param in zip(old["params"], group["params"], strict=True)
        }
        self.state = defaultdict(dict)
        for i, values in state_dict["state"].items():
            param = by_index[int(i)]
            self.state[param] = {k: self._loaded(param, k, v) for k, v in values.items()}
        for old, group in zip(saved, self.param_groups, strict=True):
            group.update({k: v for k, v in old.items() if k != "params"})

    def _loaded(self, param: torch.Tensor, key: str, value: Any) -> Any:
        """A saved state value made ready for ``param``, as torch does: moments take the
        parameter's dtype and device; the step count stays as saved."""
        if not isinstance(value, torch.Tensor) or key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)


class _Adam(ParamOptimizer):
    """What AdamW and Adam share: their settings, and each parameter's first state."""

    DEFAULT_DECAY = 0.0  # ``weight_decay`` when none is given: torch's for the same class

    def __init__(
        self,
        params: Iterable,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float | None = None,
    ):
        decay = self.DEFAULT_DECAY if weight_decay is None else weight_decay
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": decay})

    def _start(self, param: torch.Tensor, on_device: bool) -> dict[str, Any]:
        """``param``'s state, made at its first step; the step count a float32 tensor on
        ``param``'s device (where a fused kernel reads it) or else on the host."""
        state = self.state[param]
        if not state:
            where = param.device if on_device else "cpu"
            state["step"] = torch.zeros((), dtype=torch.float32, device=where)
            for key in ("exp_avg", "exp_avg_sq"):
                state[key] = torch.zeros_like(param, memory_format=torch.preserve_format)
        return state


class AdamW(_Adam):
    """``torch.optim.AdamW(fused=True)``: its fused kernel (the CPU, CUDA, and ``meta`` for
    runs that only check shapes and devices)."""

    DEFAULT_DECAY = 1e-2

    def _loaded(self, param: torch.Tensor, key: str, value: Any) -> Any:
        if key == "step":  # the fused kernel reads it on the parameter's device
            return value.to(dtype=torch.float32, device=param.device)
        return super()._loaded(param, key, value)

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            by_layout: dict[tuple, list[list[torch.Tensor]]] = {}
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self._start(param, on_device=True)
                lists = by_layout.setdefault((param.device, param.dtype), [[], [], [], [], []])
                for kept, value in zip(
                    lists,
                    (param, param.grad, state["exp_avg"], state["exp_avg_sq"], state["step"]),
                    strict=True,
                ):
                    kept.append(value)
            beta1, beta2 = group["betas"]
            for params, grads, exp_avgs, exp_avg_sqs, steps in by_layout.values():
                torch._foreach_add_(steps, 1)
                torch._fused_adamw_(
                    params,
                    grads,
                    exp_avgs,
                    exp_avg_sqs,
                    [],
                    steps,
                    amsgrad=False,
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=group["weight_decay"],
                    eps=group["eps"],
                    maximize=False,
                    grad_scale=None,
                    found_inf=None,
                )


class Adam(_Adam):
    """``torch.optim.Adam`` (L2 weight decay added to the gradient), its single-tensor
    arithmetic: for a few small tensors, such as DNAS's architecture logits."""

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self._start(param, on_device=False)  # as torch keeps it
                grad, exp_avg, exp_avg_sq = param.grad, state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                if decay != 0:
                    grad = grad.add(param, alpha=decay)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step = state["step"].item()
                correction2_sqrt = (1 - beta2**step) ** 0.5
                denom = (exp_avg_sq.sqrt() / correction2_sqrt).add_(eps)
                param.addcdiv_(exp_avg, denom, value=-(lr / (1 - beta1**step)))


class RowwiseAdam(ParamOptimizer):
    """Lazy Adam for sparse embedding gradients: only the rows a batch touched move, and
    their moments, exactly as ``torch.optim.SparseAdam`` does, to float rounding.

    Written here because SparseAdam does the update with sparse-tensor arithmetic (two
    ``sparse_mask`` and three sparse additions per table per step): profiled on
    MovieLens-1M it took 15-20% of a DCNv2 or DLRM training step. The step itself is
    ``kernels.rowwise_adam.step_rows``: a C kernel that sums each touched row's gradient and
    updates its weights and moments in two passes, or, where no C compiler is at hand, its
    PyTorch reference (gather the touched rows, torch's fused Adam kernel, scatter; on a GPU
    small tables are stepped whole and the touched rows kept, without a host sync).

    Tables of one layout (dtype, device, row width) are held as row ranges of one buffer
    (``_Tables``: each parameter's ``data`` becomes a view of it), and their Adam moments
    likewise, so that the reference updates all of them with one gather, one kernel and one
    scatter, not one of each per table. ``backend``: "auto" (the C kernel where it builds),
    "native" or "torch" (``kernels.backends.NATIVE_BACKENDS``). ``tests/test_train.py`` holds
    both backends, and both of the reference's ways of finding the rows (``dense_below``),
    to SparseAdam's trajectory.
    """

    def __init__(
        self, params, lr: float, betas=(0.9, 0.999), eps=1e-8, dense_below=8.0, backend="auto"
    ):
        check_backend(backend, NATIVE_BACKENDS)
        self.backend = backend
        self._tables: list[_Tables] = []  # filled by add_param_group, which __init__ calls
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})
        self.dense_below = dense_below

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        index = len(self.param_groups) - 1
        by_layout: dict[tuple, dict[int, torch.Tensor]] = {}
        for param in self.param_groups[index]["params"]:  # a table listed twice: once
            layout = (param.dtype, param.device, param.shape[1:])
            by_layout.setdefault(layout, {})[id(param)] = param
        self._tables += [_Tables(index, list(params.values())) for params in by_layout.values()]

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        for tables in self._tables:
            tables.bind_state(self.state)  # the loaded moments, as views of one buffer again

    @torch.no_grad()
    def step(self) -> None:
        for tables in self._tables:
            group = self.param_groups[tables.group]
            tables.step(group, self.state, self.dense_below, self.backend)


class _Tables:
    """Embedding tables of one layout as row ranges of one buffer, and their Adam moments
    likewise: ``RowwiseAdam``'s unit of work."""

    def __init__(self, group: int, params: list[torch.Tensor]):
        self.group, self.params = group, params
        self.starts = [0]
        for param in params:
            self.starts.append(self.starts[-1] + len(param))
        self.bind_weights()
        self.exp_avg = self.exp_avg_sq = None  # bound at the first step
        self.slots = None  # the C kernel's row map, made at its first step

    def bind_weights(self) -> None:
        """The tables' weights as views of one buffer (again, if a table's ``data`` was
        replaced since, as ``module.to`` or an assignment to ``.data`` do)."""
        if len(self.params) == 1:
            self.weights = self.params[0].detach()
        else:
            self.weights = torch.cat([param.detach() for param in self.params])
            for param, rows in zip(self.params, self._ranges(self.weights), strict=True):
                param.data = rows
        self.pointers = [param.data_ptr() for param in self.params]

    def _ranges(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        return [buffer[a:b] for a, b in zip(self.starts, self.starts[1:], strict=False)]

    def bind_state(self, state: dict) -> None:
        """Each table's moments (zeros for a table never stepped) as views of one buffer."""
        for param in self.params:
            if not state[param]:
                state[param].update(
                    step=0, exp_avg=torch.zeros_like(param), exp_avg_sq=torch.zeros_like(param)
                )
        for key in ("exp_avg", "exp_avg_sq"):
            buffer = torch.cat([state[param][key] for param in self.params])
            for param, rows in zip(self.params, self._ranges(buffer), strict=True):
                state[param][key] = rows
            setattr(self, key, buffer)

    def step(self, group: dict, state: dict, dense_below: float, backend: str) -> None:
        stepped = [i for i, p in enumerate(self.params) if p.grad is not None and p.grad._nnz() > 0]
        if not stepped:
            return
        if [param.data_ptr() for param in self.params] != self.pointers:
            self.bind_weights()
        if self.exp_avg is None:
            self.bind_state(state)
        if self.slots is None and backend != "torch" and rowwise_adam.native_available():
            self.slots = rowwise_adam.slots_for(self.weights)
        # Adam's bias correction counts each table's own steps: tables that missed a step
        # (no id looked up) are updated apart from the others.
        by_count: dict[int, list[int]] = {}
        for i in stepped:
            by_count.setdefault(state[self.params[i]]["step"], []).append(i)
        for count, tables in by_count.items():
            rowwise_adam.step_rows(
                self.weights,
                self.exp_avg,
                self.exp_avg_sq,
                [(self.starts[i], self.params[i].grad) for i in tables],
                rowwise_adam.AdamStep(group["lr"], group["betas"], group["eps"], count + 1),
                slots=self.slots,
                dense_below=dense_below,
                backend=backend,
            )
            for i in tables:
                state[self.params[i]]["step"] = count + 1
