"""Every registered space, through its declared decisions: members round-trip through
encode/decode, every derived move yields members, the count is exact on small spaces, and
specs outside the space are refused by name."""

from __future__ import annotations

import itertools

import numpy as np
import optuna
import pytest

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from search_spaces import SpaceInputs, create_space, list_spaces
from search_spaces.decisions import Decision, count, freeze

INPUTS = SpaceInputs(11, 8, 64)  # MovieLens-1M: 11 feature tokens, 8 request-side, history


@pytest.mark.parametrize("name", list_spaces())
def test_members_round_trip_through_their_decisions(name: str) -> None:
    space = create_space(name, {}, INPUTS)
    rng = np.random.default_rng(0)
    for _ in range(40):
        spec = space.sample(rng)
        values = space.encode(spec)
        assert space.decode(values) == spec
        for d in space.decisions:  # exactly the active decisions have values
            active = d.active(values)
            assert (d.name in values) == active, d.name
            if active:
                d.index(values[d.name])


@pytest.mark.parametrize("name", list_spaces())
def test_every_derived_move_yields_members(name: str) -> None:
    space = create_space(name, {}, INPUTS)
    rng = np.random.default_rng(1)
    specs = [space.sample(rng) for _ in range(15)]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for a, b in itertools.pairwise(specs):
        child = space.mutate(a, rng)
        assert child.arch_id != a.arch_id
        for spec in (child, space.crossover(a, b, rng)):
            assert space.decode(space.encode(spec)) == spec
        trial = study.ask()
        spec = space.suggest(trial)
        assert space.decode(space.encode(spec)) == spec
        assert set(trial.params) <= {d.name for d in space.decisions}
        study.tell(trial, 0.0)


def test_a_mutation_changes_one_decision_and_redraws_only_what_it_activates() -> None:
    space = create_space("ctr_stack", {}, INPUTS)
    rng = np.random.default_rng(2)
    for _ in range(50):
        parent = space.sample(rng)
        a, b = space.encode(parent), space.encode(space.mutate(parent, rng))
        changed = {k for k in a.keys() & b.keys() if freeze(a[k]) != freeze(b[k])}
        assert len(changed) <= 2, changed  # the decision moved, and maybe one it activated
        if "depth" not in changed and not any(k.endswith(".block") for k in changed):
            assert len(changed) == 1 and a.keys() == b.keys()


def test_the_count_is_every_distinct_member_of_a_small_space() -> None:
    options = {
        "embedding_dims": [4, 8],
        "max_depth": 3,
        "blocks": ["fm", "dcnv2", "self_attention"],
        "block_params": {"dcnv2": {"num_layers": [1, 2]}, "self_attention": {"num_heads": [1]}},
        "top_mlps": [[], [8]],
        "top_inputs": ["last"],
    }
    space = create_space("ctr_stack", options, SpaceInputs(6))
    # lasts: fm + dcnv2 x2 + attention = 4; mixers (fm reduces): 3; depths 1..3: 4 + 12 + 36
    assert space.size() == 52 * 2 * 2
    rng = np.random.default_rng(0)
    assert len({space.sample(rng).arch_id for _ in range(20000)}) == space.size()


def test_count_branches_only_on_decisions_others_depend_on() -> None:
    decisions = [
        Decision("a", (1, 2, 3)),
        Decision("b", ("x", "y"), (("a", (1,)),)),
        Decision("c", ([1], [2, 3])),
    ]
    assert count(decisions) == (2 + 1 + 1) * 2


@pytest.mark.parametrize("name", list_spaces())
def test_a_value_outside_the_choices_is_refused_by_decision(name: str) -> None:
    space = create_space(name, {}, INPUTS)
    values = space.encode(space.sample(np.random.default_rng(4)))
    with pytest.raises(ConfigError) as caught:
        space.decode({**values, "embedding_dim": 7})
    assert caught.value.field == "embedding_dim"
    assert "not one of the choices" in str(caught.value)
    with pytest.raises(ConfigError, match="no value for this decision"):
        space.decode({k: v for k, v in values.items() if k != "top_mlp"})


def test_a_spec_outside_the_space_is_refused() -> None:
    space = create_space("ctr_stack", {}, INPUTS)
    spec = ArchSpec.from_dict(
        {"embedding_dim": 16, "interaction": [{"block": "dcnv2", "rank": 7}], "top_mlp": []}
    )
    with pytest.raises(ConfigError) as caught:
        space.encode(spec)
    assert caught.value.field == "last.dcnv2.rank"
    default_params = ArchSpec.from_dict(
        {
            "embedding_dim": 16,
            "interaction": [{"block": "dcnv2", "num_layers": 1, "rank": 16}],
            "top_mlp": [],
            "bottom_mlp": [4],
        }
    )
    with pytest.raises(ConfigError, match="not a member"):
        space.encode(default_params)


def test_ctr_stack_seeds_give_the_members_they_gave_before_spaces_were_declared() -> None:
    """The first members of seed 0, as the hand-written sampler drew them."""
    space = create_space("ctr_stack", {}, INPUTS)
    rng = np.random.default_rng(0)
    assert [space.sample(rng).arch_id for _ in range(3)] == FIRST_CTR_STACK_IDS


# What the hand-written ctr_stack sampler (before commit "spaces declare their decisions")
# drew first from np.random.default_rng(0) on these inputs.
FIRST_CTR_STACK_IDS = ["e36097d055e5b4bd", "02d1fb9147e20784", "d42208484409bfd3"]
