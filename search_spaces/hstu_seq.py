"""``hstu_seq``: ``ctr_stack`` plus a history encoder (HSTU layers over each row's last
events, pooled into one request-side token beside the feature tokens).

    spec = ctr_stack's genes + sequence {max_len, HSTU layers, pooling}

The dataset must have a history (MovieLens: the user's earlier ratings, see
``nas/data/movielens.py``).
"""

from __future__ import annotations

from pydantic import Field

from nas.errors import ConfigError
from nas.spec import ArchSpec
from search_spaces import sequence
from search_spaces.base import SpaceInputs
from search_spaces.ctr_stack import CtrStack, CtrStackOptions
from search_spaces.decisions import Decision, Values
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

    def supernet_plan(self):
        raise ConfigError(
            "space.name",
            "space 'hstu_seq' has no supernet form yet: its history encoder (HSTU layers over "
            "the user's events, with their own length, depth and head choices) is not a "
            "shared candidate of the supernet; search it with random, evolution or optuna, or "
            "search its stack with ctr_stack",
        )

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
