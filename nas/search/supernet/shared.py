"""Candidates that share weights: one stored tensor per parameter, each candidate its slice.

    SharedBlock([DCNv2Config(11, 16, num_layers=1, rank=16), ..., DCNv2Config(11, 16, 3, 64)])

Every candidate is a registered block config at the same input shape. Each parameter name
any of them has is stored once, at the largest shape any of them needs; a candidate reads
the leading slice it needs (its first rows, columns, ...): DCNv2 of rank 16 uses the first
16 of rank 64's projections, a 1-layer cross the first of 3 layers, a 64-wide MLP the first
64 units of the 128-wide one. The candidate runs its own block's forward on those slices
(``torch.func.functional_call``), so it computes exactly what a stand-alone block with the
sliced weights copied in computes: ``extract(config)`` gives that block.

Why not one module per candidate (no sharing) or hand-written "super" versions of every
block: the first trains each of hundreds of candidates on a sliver of the steps; the second
doubles every block's code. Leading slices need neither, and any registered block works.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call

from blocks import BlockConfig, build_block


def _stored(name: str) -> str:
    return name.replace(".", "__")  # ParameterDict keys cannot hold dots


@functools.cache
def _shapes(config: BlockConfig) -> dict[str, torch.Size]:
    """The shape of each parameter of ``config``'s block, from a build on the meta device
    (nothing allocated or initialised). Cached: a space's positions share most of their
    candidates (DHEN's 6,480 candidate configs hold 4,050 distinct ones), and a build costs
    a few ms."""
    with torch.device("meta"):
        return {n: p.shape for n, p in build_block(config).named_parameters()}


class SharedBlock(nn.Module):
    def __init__(self, configs: Sequence[BlockConfig]):
        super().__init__()
        if not configs:
            raise ValueError("a SharedBlock needs at least one candidate")
        self.shapes: dict[BlockConfig, dict[str, torch.Size]] = {}
        largest: dict[str, tuple[int, BlockConfig]] = {}  # name -> (numel, its owner)
        for config in configs:
            self.shapes[config] = shapes = _shapes(config)
            for name, shape in shapes.items():
                if name in largest and largest[name][0] >= shape.numel():
                    continue
                largest[name] = (shape.numel(), config)
        stored = {}
        for name, (_, owner) in largest.items():
            dims = [len(s[name]) for s in self.shapes.values() if name in s]
            if len(set(dims)) > 1:
                raise ValueError(f"parameter {name} has different ranks across candidates")
            shape = [
                max(s[name][i] for s in self.shapes.values() if name in s) for i in range(dims[0])
            ]
            stored[name] = (shape, owner)
        # Each stored tensor starts as its largest candidate's own initialisation.
        owners = {owner: None for _, owner in stored.values()}
        for owner in owners:
            owners[owner] = dict(build_block(owner).named_parameters())
        self.weights = nn.ParameterDict()
        for name, (shape, owner) in stored.items():
            full = torch.zeros(shape)
            value = owners[owner][name].detach()
            full[tuple(slice(0, n) for n in value.shape)] = value
            self.weights[_stored(name)] = nn.Parameter(full)
        self._templates: dict[tuple, nn.Module] = {}  # (config, device): built on first use

    @property
    def configs(self) -> list[BlockConfig]:
        return list(self.shapes)

    def slices(self, config: BlockConfig) -> dict[str, torch.Tensor]:
        """The candidate's parameters, as views into the shared tensors."""
        return {
            name: self.weights[_stored(name)][tuple(slice(0, n) for n in shape)]
            for name, shape in self.shapes[config].items()
        }

    def forward(self, config: BlockConfig, *args, **kwargs) -> torch.Tensor:
        """Candidate ``config``'s forward (its block's own arguments) on the shared slices."""
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        return functional_call(self._template(config, device), self.slices(config), args, kwargs)

    def extract(self, config: BlockConfig) -> dict[str, torch.Tensor]:
        """The candidate's state dict (copies), for a stand-alone block of ``config``."""
        return {name: value.detach().clone() for name, value in self.slices(config).items()}

    def _template(self, config: BlockConfig, device: torch.device) -> nn.Module:
        """The block's own code (and its buffers, on ``device``: the inputs'), kept out of the
        module tree, so ``.to()`` never reaches it: only ``weights`` is trained. Built
        without touching the global RNG, so when a candidate is first used does not change
        any later random draw."""
        key = (config, device)
        if key not in self._templates:
            with torch.random.fork_rng(devices=[]):
                self._templates[key] = _hollow(build_block(config), device)
        return self._templates[key]


def _hollow(module: nn.Module, device: torch.device) -> nn.Module:
    """``module`` without its own parameter storage (its code stays, its buffers move to
    ``device``): it only ever runs through ``functional_call`` with the shared slices."""
    for sub in module.modules():
        for name in list(sub._parameters):
            if sub._parameters[name] is not None:
                sub._parameters[name] = nn.Parameter(torch.empty(0, device="meta"))
        for name, buffer in list(sub._buffers.items()):
            if buffer is not None:
                sub._buffers[name] = buffer.to(device)
    return module
