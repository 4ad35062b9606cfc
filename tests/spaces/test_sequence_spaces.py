"""hstu_seq and rocs: every member encodes the history; rocs keeps GLM as a prefix with DCA
only after GLM layers; genes and specs convert both ways; data without a history or a
request side is refused with a clear error."""

from __future__ import annotations

import itertools

import numpy as np
import optuna
import pytest

from nas.core.errors import ConfigError
from search_spaces import SpaceInputs, create_space

INPUTS = SpaceInputs(11, 8, 64)  # MovieLens-1M: 11 feature tokens, 8 request-side, history


@pytest.mark.parametrize("name", ["hstu_seq", "rocs"])
def test_every_member_encodes_the_history(name):
    space = create_space(name, {}, INPUTS)
    rng = np.random.default_rng(0)
    specs = [space.sample(rng) for _ in range(30)]
    assert all(s.sequence is not None and s.sequence.max_len in (16, 32) for s in specs)
    assert {len(s.sequence.layers) for s in specs} == {1, 2}
    assert {s.sequence.pooling for s in specs} == {"last", "mean"}
    assert len({s.arch_id for s in specs}) == 30


@pytest.mark.parametrize("name", ["hstu_seq", "rocs"])
@pytest.mark.parametrize(("history", "lengths"), [(8, {8}), (20, {16}), (16, {16})])
def test_the_default_lengths_are_those_the_history_keeps(name, history, lengths):
    """A dataset whose history keeps 8 events: the default choices (16, 32) are more than it
    has, so the space searches its 8; a user's own choice beyond it is refused."""
    space = create_space(name, {}, SpaceInputs(11, 8, history))
    rng = np.random.default_rng(0)
    assert {space.sample(rng).sequence.max_len for _ in range(20)} == lengths
    with pytest.raises(ConfigError, match=f"give choices up to {history}"):
        create_space(name, {"sequence": {"max_lens": [8, 32]}}, SpaceInputs(11, 8, history))


def test_rocs_glm_is_a_prefix_and_dca_follows_glm_layers():
    space = create_space("rocs", {}, INPUTS)
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(80):
        spec = space.sample(rng)
        names = [layer.block for layer in spec.interaction]
        stack = [n for n in names if n != "dca"]
        glm = [n.startswith("glm_") for n in stack]
        assert glm == sorted(glm, reverse=True), f"GLM after a plain layer: {names}"
        for i, n in enumerate(names):
            if n == "dca":
                assert names[i - 1].startswith("glm_"), names
        seen.add((sum(glm), "dca" in names))
    assert {g for g, _ in seen} == {0, 1, 2} and {d for _, d in seen} == {True, False}


def test_rocs_request_widths_follow_the_share():
    space = create_space("rocs", {"blocks": ["wukong"], "request_shares": [0.25, 0.75]}, INPUTS)
    rng = np.random.default_rng(2)
    fractions = set()
    for _ in range(40):
        for layer in space.sample(rng).interaction:
            params = dict(layer.params)
            if layer.block == "glm_wukong":
                fractions.add(params["request_fm_tokens"] / params["num_fm_tokens"])
    assert fractions == {0.25, 0.75}


@pytest.mark.parametrize("name", ["hstu_seq", "rocs"])
def test_genes_round_trip_and_moves_build(name):
    space = create_space(name, {}, INPUTS)
    rng = np.random.default_rng(3)
    specs = [space.sample(rng) for _ in range(25)]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for a, b in itertools.pairwise(specs):
        assert space.decode(space.encode(a)) == a
        child = space.mutate(a, rng)
        assert child.arch_id != a.arch_id
        INPUTS.check(child)
        INPUTS.check(space.crossover(a, b, rng))
        trial = study.ask()
        INPUTS.check(space.suggest(trial))
        study.tell(trial, 0.0)


@pytest.mark.parametrize(
    ("name", "inputs", "options", "field", "words"),
    [
        ("hstu_seq", SpaceInputs(11), {}, "space.name", "has none"),
        ("rocs", SpaceInputs(11, 0, 64), {}, "space.name", "request-side"),
        (
            "hstu_seq",
            INPUTS,
            {"sequence": {"max_lens": [128]}},
            "space.options.sequence.max_lens",
            "more than the 64 events",
        ),
        ("rocs", INPUTS, {"blocks": ["mlp"]}, "space.options.blocks", "no GLM variant"),
        ("rocs", INPUTS, {"request_shares": [1.0]}, "space.options.request_shares", "between"),
        ("rocs", INPUTS, {"sequence": {"poolings": ["max"]}}, "space.options.sequence", "last"),
        ("rocs", INPUTS, {"dca_heads": [3]}, "space.options", "do not divide"),
        (
            "rocs",
            INPUTS,
            {
                "blocks": ["dhen"],
                "block_params": {"dhen": {"modules": [["dot"]], "out_tokens": [1]}},
            },
            "space.options",
            "do not build",
        ),
    ],
)
def test_bad_inputs_and_options_name_the_field(name, inputs, options, field, words):
    with pytest.raises(ConfigError) as caught:
        create_space(name, options, inputs)
    assert caught.value.field.startswith(field), caught.value.field
    assert words in str(caught.value)
