"""``hstu_seq``: ``ctr_stack`` plus a history encoder (HSTU layers over each row's last
events, pooled into one request-side token beside the feature tokens).

    spec = ctr_stack's genes + sequence {max_len, HSTU layers, pooling}

The dataset must have a history (MovieLens: the user's earlier ratings, see
``nas/data/movielens.py``).
"""

from __future__ import annotations

import dataclasses

from pydantic import Field

from nas.arch.spec import ArchSpec
from search_spaces import sequence
from search_spaces.base import SpaceInputs
from search_spaces.ctr_stack import CtrStack, CtrStackOptions
from search_spaces.decisions import Decision, Values
from search_spaces.registry import register_space
from search_spaces.sequence import SequenceOptions, SequencePlan


class HstuSeqOptions(CtrStackOptions):
    max_depth: int = Field(default=2, ge=1, le=8)
    sequence: SequenceOptions = SequenceOptions()


@register_space
class HstuSeq(CtrStack):
    name = "hstu_seq"
    Options = HstuSeqOptions

    def __init__(self, options: HstuSeqOptions, inputs: SpaceInputs):
        fitted = sequence.fitted(options.sequence, inputs, self.name)
        options = options.model_copy(update={"sequence": fitted})
        super().__init__(options, inputs)

    def supernet_plan(self):
        """``ctr_stack``'s supernet, plus the history encoder as a shared candidate."""
        o = self.options.sequence
        encoder = SequencePlan(
            max_lens=tuple(o.max_lens),
            depths=tuple(o.depths),
            hstu_params={k: tuple(v) for k, v in o.hstu_params.items()},
            poolings=tuple(o.poolings),
        )
        return dataclasses.replace(super().supernet_plan(), sequence=encoder)

    def declare(self) -> list[Decision]:
        return super().declare() + sequence.decisions(self.options.sequence)

    def spec_data(self, values: Values) -> dict:
        return super().spec_data(values) | {
            "sequence": sequence.gene(values, self.options.sequence)
        }

    def values_of(self, spec: ArchSpec) -> Values:
        return super().values_of(spec) | sequence.values(
            spec.sequence.to_dict(), self.options.sequence
        )
