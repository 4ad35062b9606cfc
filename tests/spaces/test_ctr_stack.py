"""ctr_stack: seeded, every member builds, moves change something, options are checked."""

from __future__ import annotations

import itertools

import numpy as np
import optuna
import pytest

from nas.core.errors import ConfigError
from search_spaces import SpaceInputs, create_space, list_spaces

INPUTS = SpaceInputs(11, 8, 64)  # MovieLens-1M: 11 feature tokens, 8 request-side


@pytest.fixture
def space():
    return create_space("ctr_stack", {}, INPUTS)


def test_registered() -> None:
    assert "ctr_stack" in list_spaces()


def test_same_seed_same_samples(space) -> None:
    a = [space.sample(np.random.default_rng(5)).arch_id for _ in range(3)]
    rng1, rng2 = np.random.default_rng(9), np.random.default_rng(9)
    assert [space.sample(rng1).arch_id for _ in range(20)] == [
        space.sample(rng2).arch_id for _ in range(20)
    ]
    assert len(set(a)) == 1  # a fresh generator with the same seed: the same first member


def test_every_move_yields_a_buildable_member(space) -> None:
    rng = np.random.default_rng(0)
    specs = [space.sample(rng) for _ in range(60)]
    for spec in specs:
        INPUTS.check(spec)  # raises on any shape problem
        depth = len(spec.interaction)
        assert 1 <= depth <= space.options.max_depth
        for layer in spec.interaction[:-1]:
            assert layer.block in ("dcnv2", "self_attention"), "a reducer before the last layer"
    for a, b in itertools.pairwise(specs):
        child = space.mutate(a, rng)
        assert child.arch_id != a.arch_id
        INPUTS.check(child)
        INPUTS.check(space.crossover(a, b, rng))


def test_samples_cover_the_space(space) -> None:
    rng = np.random.default_rng(1)
    specs = [space.sample(rng) for _ in range(300)]
    assert {s.embedding_dim for s in specs} == {8, 16, 32}
    assert {layer.block for s in specs for layer in s.interaction} == set(space.options.blocks)
    assert {len(s.interaction) for s in specs} == {1, 2, 3}


def test_crossover_mixes_both_parents(space) -> None:
    rng = np.random.default_rng(2)
    a, b = space.sample(rng), space.sample(rng)
    while a.embedding_dim == b.embedding_dim:
        b = space.sample(rng)
    dims = {space.crossover(a, b, rng).embedding_dim for _ in range(40)}
    assert dims == {a.embedding_dim, b.embedding_dim}


def test_optuna_suggest_builds_and_keeps_one_distribution_per_name(space) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = {}
    for _ in range(40):
        trial = study.ask()
        spec = space.suggest(trial)
        INPUTS.check(spec)
        for name, dist in trial.distributions.items():
            assert seen.setdefault(name, dist) == dist, f"{name} changed its distribution"
        study.tell(trial, 0.0)


def test_size_counts_the_members() -> None:
    options = {
        "embedding_dims": [4, 8],
        "max_depth": 2,
        "blocks": ["fm", "dcnv2"],
        "block_params": {"dcnv2": {"num_layers": [1, 2]}},
        "top_mlps": [[]],
        "top_inputs": ["last"],
    }
    space = create_space("ctr_stack", options, SpaceInputs(6))
    # depth 1: last in {fm, dcnv2 x2} = 3; depth 2: mixer dcnv2 x2 * last 3 = 6; x 2 dims
    assert space.size() == (3 + 6) * 2
    rng = np.random.default_rng(0)
    assert len({space.sample(rng).arch_id for _ in range(500)}) == space.size()


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"max_depth": 0}, "space.options.max_depth", "greater than or equal to 1"),
        ({"blocks": ["hstu"]}, "space.options.blocks", "not an interaction block"),
        ({"blocks": []}, "space.options.blocks", "at least 1"),
        ({"blocks": ["dcnv2", "glm_wukong"]}, "space.options.blocks", "with the rocs space"),
        ({"embedding_dims": [8, 8]}, "space.options.embedding_dims", "distinct"),
        ({"top_inputs": ["first"]}, "space.options.top_inputs", "'last', 'all'"),
        ({"block_params": {"dcnv2": {"rnk": [3]}}}, "space.options", "no parameter 'rnk'"),
        (
            {"block_params": {"dcnv2": {"rank": []}}},
            "space.options.block_params",
            "dcnv2: rank: lists no choice",
        ),
        ({"depth": 3}, "space.options.depth", "valid fields here: embedding_dims"),
        (
            {"embedding_dims": [6], "block_params": {"self_attention": {"num_heads": [4]}}},
            "space.options",
            "cannot take embedding_dims[0] = 6",
        ),
    ],
)
def test_bad_options_name_the_field(options, field, words) -> None:
    with pytest.raises(ConfigError) as caught:
        create_space("ctr_stack", options, INPUTS)
    assert caught.value.field == field
    assert words in str(caught.value)


def _choice_lists(options: dict, path: tuple = ()):
    """Each list of choices in a space's options, with where it sits: ((key, ...), list)."""
    for key, value in options.items():
        if isinstance(value, list):
            yield (*path, key), value
        elif isinstance(value, dict):
            yield from _choice_lists(value, (*path, key))


def _with(options: dict, path: tuple, value) -> dict:
    head, *rest = path
    return {**options, head: _with(options[head], tuple(rest), value) if rest else value}


@pytest.mark.parametrize("name", list_spaces())
def test_a_choice_listed_twice_or_no_choice_is_refused_naming_its_option(name: str) -> None:
    from search_spaces.registry import SPACES

    defaults = SPACES.get(name).Options().model_dump()
    lists = list(_choice_lists(defaults))
    assert len(lists) >= 5
    for path, choices in lists:
        for changed, words in (([*choices, choices[0]], "twice"), ([], "no choice")):
            with pytest.raises(ConfigError) as caught:
                create_space(name, _with(defaults, path, changed), INPUTS)
            message = str(caught.value)
            assert words in message or "at least 1" in message, (path, message)
            assert caught.value.field.startswith(f"space.options.{path[0]}"), (path, message)


@pytest.mark.parametrize("name", list_spaces())
@pytest.mark.parametrize("bad", [0, -1, "nope", 1.5, None, [0], True])
def test_a_bad_choice_anywhere_in_the_options_is_refused_or_builds(name: str, bad) -> None:
    from search_spaces.registry import SPACES

    defaults = SPACES.get(name).Options().model_dump()
    inputs = SpaceInputs(11, 8, 64)
    for path, choices in _choice_lists(defaults):
        try:
            space = create_space(name, _with(defaults, path, [bad, *choices[1:]]), inputs)
        except ConfigError:
            continue
        inputs.check(space.sample(np.random.default_rng(0)))  # accepted: its members build


@pytest.mark.parametrize("name", list_spaces())
def test_every_registered_space_yields_buildable_members(name: str) -> None:
    space = create_space(name, {}, INPUTS)
    rng = np.random.default_rng(3)
    specs = [space.sample(rng) for _ in range(20)]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for a, b in itertools.pairwise(specs):
        for spec in (a, space.mutate(a, rng), space.crossover(a, b, rng)):
            INPUTS.check(spec)
        trial = study.ask()
        INPUTS.check(space.suggest(trial))
        study.tell(trial, 0.0)
    assert space.size() > len({s.arch_id for s in specs}) > 10


@pytest.mark.parametrize(("name", "block"), [("wukong", "wukong"), ("dhen", "dhen")])
def test_the_modern_spaces_stack_their_own_layer(name: str, block: str) -> None:
    space = create_space(name, {}, INPUTS)
    rng = np.random.default_rng(0)
    for _ in range(10):
        assert {layer.block for layer in space.sample(rng).interaction} == {block}


@pytest.mark.parametrize("name", ["ctr_stack", "dhen"])
def test_on_one_feature_token_blocks_that_need_two_are_refused_before_a_search(name) -> None:
    """A dataset of one field gives one feature token; the stack's grammar (a mixer keeps at
    least two tokens) then failed in the middle of a search, at the first member with a dot
    or an FM after a one-token layer ("interaction[1].num_tokens: ..."), and the search
    stopped "resumable" with nothing to mend on resume. Now such blocks are refused when the
    space is made, naming those that do take one token; with those, every member builds."""
    one = SpaceInputs(1, 0, 0)
    with pytest.raises(ConfigError) as refused:
        create_space(name, {}, one)
    assert refused.value.field == "space.options.blocks"
    assert "the dataset gives 1 feature token (one field)" in refused.value.message
    if name == "ctr_stack":
        assert "dot, fm need at least 2" in refused.value.message
        assert "give blocks: [mlp, dcnv2, self_attention]" in refused.value.message
        space = create_space(name, {"blocks": ["mlp", "dcnv2", "self_attention"]}, one)
        rng = np.random.default_rng(0)
        for _ in range(100):
            one.check(space.sample(rng))
    create_space(name, {}, SpaceInputs(2, 0, 0))  # two tokens: as before
