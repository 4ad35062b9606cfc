"""The block registry: ``register_block``, ``create_block``, ``list_blocks``, ``get_block``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blocks.base import Block, BlockConfig
from nas.core.catalog import Registry
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


BLOCKS: Registry[BlockEntry] = Registry("block", "block")
_BY_CONFIG: dict[type[BlockConfig], BlockEntry] = {}  # what builds a config's module


def register_block(
    name: str, *, kind: str, config: type[BlockConfig]
) -> Callable[[type[Block]], type[Block]]:
    """Class decorator: register ``module_cls`` under ``name``. A duplicate name is an error."""
    if kind not in KINDS:
        raise ValueError(f"block kind must be one of {KINDS}, got {kind!r}")

    def decorate(module_cls: type[Block]) -> type[Block]:
        if config in _BY_CONFIG and name not in BLOCKS:  # a taken name: add says so
            raise ValueError(
                f"{config.__name__} already belongs to block {_BY_CONFIG[config].name!r}"
            )
        _BY_CONFIG[config] = BLOCKS.add(name, BlockEntry(name, kind, config, module_cls))
        return module_cls

    return decorate


def get_block(name: str, kind: str | None = None, field: str = "block") -> BlockEntry:
    """The entry for ``name``; an unknown name (or one of another kind) lists the choices."""
    if kind is None:
        return BLOCKS.get(name, field)
    if name not in BLOCKS or BLOCKS.get(name).kind != kind:
        raise UnknownNameError(field, f"{kind} block", name, list_blocks(kind=kind))
    return BLOCKS.get(name)


def list_blocks(pattern: str = "*", kind: str | None = None) -> list[str]:
    return [n for n in BLOCKS.names(pattern) if kind is None or BLOCKS.get(n).kind == kind]


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
