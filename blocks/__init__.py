"""PyTorch model blocks, each a frozen config + ``nn.Module`` + analytic cost, by name.

>>> import blocks
>>> blocks.list_blocks(kind="interaction")
['dcnv2', 'dhen', 'dot', 'fm', 'mlp', 'self_attention', 'wukong']
>>> layer = blocks.create_block("dcnv2", num_tokens=11, dim=16, rank=32)
"""

from blocks import (  # noqa: F401
    attention,
    dca,
    dcnv2,
    dhen,
    dot,
    embedding,
    fm,
    glm_layers,
    hstu,
    mlp,
    wukong,
)
from blocks.base import Block, BlockConfig, Gemm, InteractionConfig, TokenShape
from blocks.registry import (
    BlockEntry,
    build_block,
    create_block,
    get_block,
    list_blocks,
    register_block,
)

__all__ = [
    "Block",
    "BlockConfig",
    "BlockEntry",
    "build_block",
    "Gemm",
    "InteractionConfig",
    "TokenShape",
    "create_block",
    "get_block",
    "list_blocks",
    "register_block",
]
