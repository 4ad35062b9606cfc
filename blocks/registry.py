"""The block registry: ``register_block``, ``create_block``, ``list_blocks``, ``get_block``."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blocks.base import Block, BlockConfig
from nas.core.errors import ConfigError, UnknownNameError, shown

KINDS = ("embedding", "interaction", "sequence")


@dataclass(frozen=True)
class BlockEntry:
    name: str
    kind: str
    config_cls: type[BlockConfig]
    module_cls: type[Block]

    @property
    def summary(self) -> str:
        doc = (self.module_cls.__doc__ or "").strip()
        return doc.splitlines()[0].replace("``", "") if doc else ""

    def config(self, params: dict[str, Any], **context: Any) -> BlockConfig:
        return self.config_cls.from_params(params, **context)


_REGISTRY: dict[str, BlockEntry] = {}
_BY_CONFIG: dict[type[BlockConfig], BlockEntry] = {}


def register_block(
    name: str, *, kind: str, config: type[BlockConfig]
) -> Callable[[type[Block]], type[Block]]:
    """Class decorator: register ``module_cls`` under ``name``. A duplicate name is an error."""
    if kind not in KINDS:
        raise ValueError(f"block kind must be one of {KINDS}, got {kind!r}")

    def decorate(module_cls: type[Block]) -> type[Block]:
        if name in _REGISTRY:
            raise ValueError(f"block {name!r} is already registered")
        if config in _BY_CONFIG:
            raise ValueError(
                f"{config.__name__} already belongs to block {_BY_CONFIG[config].name!r}"
            )
        _REGISTRY[name] = _BY_CONFIG[config] = BlockEntry(name, kind, config, module_cls)
        return module_cls

    return decorate


def get_block(name: str, kind: str | None = None, field: str = "block") -> BlockEntry:
    """The entry for ``name``; an unknown name (or one of another kind) lists the choices."""
    entry = _REGISTRY.get(name) if isinstance(name, str) else None
    if entry is None or (kind is not None and entry.kind != kind):
        label = f"{kind} block" if kind else "block"
        raise UnknownNameError(field, label, name, list_blocks(kind=kind))
    return entry


def list_blocks(pattern: str = "*", kind: str | None = None) -> list[str]:
    return sorted(
        name
        for name, entry in _REGISTRY.items()
        if fnmatch.fnmatch(name, pattern) and (kind is None or entry.kind == kind)
    )


def build_block(config: BlockConfig) -> Block:
    """The block module a config describes."""
    return _BY_CONFIG[type(config)].module_cls(config)


def create_block(name: str, **cfg: Any) -> Block:
    """Build block ``name`` from its config values (interaction blocks: with num_tokens, dim)."""
    entry = get_block(name)
    context = {k: cfg.pop(k) for k in entry.config_cls.context_fields if k in cfg}
    missing = [k for k in entry.config_cls.context_fields if k not in context]
    if missing:
        raise ConfigError(missing[0], f"block {shown(name)} needs {', '.join(missing)}")
    return build_block(entry.config(cfg, **context))
