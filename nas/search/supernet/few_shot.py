"""Few-shot supernets (Zhao et al., "Few-shot Neural Architecture Search", 2021): the space
split by the values of a few decisions into families, one sub-supernet per family.

    split = FewShotSplit(space, ["last.block"])     # mlp, dot, fm, dcnv2, self_attention
    split.families                                  # [("dcnv2",), ("dot",), ...]
    split.family(spec)                              # the family ``spec`` belongs to
    split.sample(index, rng)                        # a member of family ``index``

Each sub-supernet starts as a copy of the one shared supernet and trains only on its own
family's members, so members of other families no longer pull on its weights (the
co-adaptation that makes one supernet rank families against each other badly). A member is
then scored with its family's sub-supernet. A family is the tuple of the split decisions'
values (as labels: ``[256, 128]`` is ``"256-128"``), None where a decision is inactive
(``layer0.block`` of a one-layer stack).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from search_spaces import decisions as space_decisions
from search_spaces.base import SearchSpace

FAMILY_DRAWS = 4096  # members drawn (seeded) to list the families a split makes
MAX_TRIES = 1000  # draws to find a member of a family whose decisions may be inactive

Family = tuple


class FewShotSplit:
    def __init__(self, space: SearchSpace, decisions: Sequence[str]):
        names = [d.name for d in space.decisions]
        unknown = [d for d in decisions if d not in names]
        if not decisions or unknown:
            raise ConfigError(
                "strategy.options.few_shot",
                f"names decisions of the space to split it by; {space.name} has no "
                f"{', '.join(unknown) or 'decision named'}: its decisions are {', '.join(names)}",
            )
        self.space, self.decisions = space, tuple(decisions)
        by_name = {d.name: d for d in space.decisions}
        self._choices = {  # each split decision's choices by label
            n: {space_decisions.label(c): c for c in by_name[n].choices} for n in decisions
        }
        rng = np.random.default_rng(0)
        drawn = {self.family(space.sample(rng)) for _ in range(FAMILY_DRAWS)}
        self.families: list[Family] = sorted(drawn, key=repr)

    def family(self, spec: ArchSpec) -> Family:
        values = self.space.encode(spec)
        return tuple(
            None if name not in values else space_decisions.label(values[name])
            for name in self.decisions
        )

    def index(self, spec: ArchSpec) -> int | None:
        """The index of ``spec``'s family, or None for a family the listing did not meet (a
        member that rare is scored with the shared supernet)."""
        family = self.family(spec)
        return self.families.index(family) if family in self.families else None

    def sample(self, index: int, rng: np.random.Generator) -> ArchSpec:
        """A member of family ``index``, drawn as ``space.sample`` draws, given its values:
        the split decisions set, the rest drawn (again where a set one came out inactive)."""
        family = self.families[index]
        fixed = {
            n: self._choices[n][v]
            for n, v in zip(self.decisions, family, strict=True)
            if v is not None
        }
        for _ in range(MAX_TRIES):
            values = space_decisions.complete(
                self.space.decisions, fixed, lambda d: space_decisions.pick(rng, d.choices)
            )
            spec = self.space.build(values)
            if self.family(spec) == family:
                return spec
        raise RuntimeError(f"no member of family {family} in {MAX_TRIES} draws")

    def label(self, index: int) -> str:
        return ", ".join(
            f"{n}={v}" for n, v in zip(self.decisions, self.families[index], strict=True)
        )
