"""``hstu_seq``: ``ctr_stack`` plus a history encoder (HSTU layers over each row's last
events, pooled into one request-side token beside the feature tokens).

    spec = ctr_stack's genes + sequence {max_len, HSTU layers, pooling}

The dataset must have a history (MovieLens: the user's earlier ratings, see
``nas/data/movielens.py``).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from nas.spec import ArchSpec
from search_spaces import sequence
from search_spaces.base import SpaceInputs
from search_spaces.ctr_stack import CtrStack, CtrStackOptions
from search_spaces.registry import register_space
from search_spaces.sequence import SequenceOptions


class HstuSeqOptions(CtrStackOptions):
    max_depth: int = Field(default=2, ge=1, le=8)
    sequence: SequenceOptions = SequenceOptions()


@register_space
class HstuSeq(CtrStack):
    name = "hstu_seq"
    Options = HstuSeqOptions

    def __init__(self, options: HstuSeqOptions, inputs: SpaceInputs):
        sequence.check_history(options.sequence, inputs, self.name)
        super().__init__(options, inputs)

    def _with_sequence(self, spec: ArchSpec, gene: dict) -> ArchSpec:
        return self._spec(self._genes(spec) | {"sequence": gene})

    def sample(self, rng: np.random.Generator) -> ArchSpec:
        return self._with_sequence(super().sample(rng), sequence.sample(self.options.sequence, rng))

    def mutate(self, spec: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        """The encoder one time in five, the stack otherwise."""
        if rng.random() < 0.2:
            for _ in range(10):
                gene = sequence.mutate(self._genes(spec)["sequence"], self.options.sequence, rng)
                child = self._with_sequence(spec, gene)
                if child.arch_id != spec.arch_id:
                    return child
        return super().mutate(spec, rng)

    def crossover(self, a: ArchSpec, b: ArchSpec, rng: np.random.Generator) -> ArchSpec:
        child = super().crossover(a, b, rng)
        donor = a if rng.random() < 0.5 else b
        return self._with_sequence(child, self._genes(donor)["sequence"])

    def suggest(self, trial) -> ArchSpec:
        stack = super().suggest(trial)
        return self._with_sequence(stack, sequence.suggest(self.options.sequence, trial))

    def size(self) -> int:
        return super().size() * sequence.size(self.options.sequence)
