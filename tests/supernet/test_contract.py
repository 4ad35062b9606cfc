"""Every space that declares a supernet passes these: a member's path through the supernet
computes what its extracted stand-alone model computes; the expected cost is differentiable
and is the member's measured FLOPs when the probabilities are one-hot; construction is
deterministic. Spaces without a supernet say why, naming the field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nas.arch.flops import measure_flops_per_example
from nas.arch.model import model_configs
from nas.core.errors import ConfigError
from nas.search.supernet import build_supernet
from search_spaces import SpaceInputs, create_space, list_spaces

WITH_SUPERNET = ["ctr_stack", "dhen", "hstu_seq", "wukong"]


@pytest.fixture(scope="module")
def batch(ml100k):
    return ml100k.features("valid")[:48]


@pytest.fixture(scope="module", params=WITH_SUPERNET)
def supernet(request, ml100k):
    torch.manual_seed(0)
    space = create_space(request.param, {}, SpaceInputs.of(ml100k.schema))
    return build_supernet(space, ml100k.schema)


def members(net, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [net.space.sample(rng) for _ in range(n)]


def test_a_members_path_is_its_extracted_model(supernet, batch) -> None:
    with torch.no_grad():
        for spec in members(supernet, 6):
            model = supernet.extract(spec)
            expected = model(*batch.inputs())
            got = supernet(spec, *batch.inputs())
            torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_training_a_path_moves_only_weights_that_path_reads(supernet, batch) -> None:
    spec = members(supernet, 1, seed=5)[0]
    before = {k: v.detach().clone() for k, v in supernet.state_dict().items()}
    supernet.zero_grad()
    supernet(spec, *batch.inputs()).sum().backward()
    read = {k for k, p in supernet.named_parameters() if p.grad is not None and p.grad.any()}
    assert read, "no weight received a gradient"
    torch.testing.assert_close(supernet.state_dict(), before)  # backward changes nothing
    model = supernet.extract(spec)
    assert sum(p.numel() for p in model.parameters()) <= sum(
        supernet.get_parameter(k).numel() for k in read
    )


def test_the_expected_cost_is_the_members_measured_flops_when_one_hot(supernet, batch) -> None:
    for spec in members(supernet, 5, seed=1):
        model = supernet.extract(spec)
        cost = supernet.expected_cost(supernet.one_hot(spec))
        assert float(cost) == pytest.approx(model.flops(), rel=1e-9)
        assert float(cost) == pytest.approx(measure_flops_per_example(model, batch[:8].inputs()))


def test_the_expected_cost_is_differentiable_and_between_the_extremes(supernet) -> None:
    logits = {
        name: torch.zeros(len(d.choices), requires_grad=True)
        for name, d in supernet.decisions.items()
    }
    probs = {name: torch.softmax(v, 0) for name, v in logits.items()}
    cost = supernet.expected_cost(probs)
    cost.backward()
    moved = [name for name, v in logits.items() if v.grad is not None and v.grad.abs().sum() > 0]
    for name in ("embedding_dim", "depth", "top_mlp", "last.block"):
        if len(supernet.decisions[name].choices) > 1:  # a single choice has nothing to move
            assert name in moved, f"no gradient reaches {name}"
    costs = [
        sum(c.flops() for c in model_configs(s, supernet.schema).values())
        for s in members(supernet, 200, seed=2)
    ]
    assert min(costs) < cost.item() < max(costs)


def test_the_expected_cost_is_the_mean_cost_over_every_member(ml100k) -> None:
    """Under probabilities that are not one-hot, the expected cost is the exact mean of the
    members' FLOPs, each weighted by its probability (the product over its active
    decisions), summed over every member of a small space."""
    options = {
        "max_depth": 2,
        "embedding_dims": [8, 16],
        "blocks": ["dot", "fm", "dcnv2", "mlp"],
        "block_params": {
            "dcnv2": {"num_layers": [1, 2], "rank": [4, 8]},
            "mlp": {"widths": [[16], [32]]},
        },
        "top_mlps": [[], [16]],
    }
    torch.manual_seed(0)
    space = create_space("ctr_stack", options, SpaceInputs.of(ml100k.schema))
    net = build_supernet(space, ml100k.schema)
    rng = torch.Generator().manual_seed(1)
    probs = {
        name: torch.softmax(torch.randn(len(d.choices), generator=rng), 0)
        for name, d in net.decisions.items()
    }

    def leaves(values: dict, weight: float, rest: list):
        if not rest:
            yield values, weight
            return
        d, *others = rest
        if not d.active(values):
            yield from leaves(values, weight, others)
            return
        for i, choice in enumerate(d.choices):
            yield from leaves({**values, d.name: choice}, weight * float(probs[d.name][i]), others)

    total, members_seen = 0.0, 0
    for values, weight in leaves({}, 1.0, list(space.decisions)):
        spec = space.decode(values)
        total += weight * sum(c.flops() for c in model_configs(spec, ml100k.schema).values())
        members_seen += 1
    assert members_seen > 100
    assert float(net.expected_cost(probs)) == pytest.approx(total, rel=1e-5)


def test_the_same_seed_builds_the_same_supernet(ml100k) -> None:
    space = create_space("ctr_stack", {}, SpaceInputs.of(ml100k.schema))
    nets = []
    for seed in (3, 3, 4):
        torch.manual_seed(seed)
        nets.append(build_supernet(space, ml100k.schema).state_dict())
    torch.testing.assert_close(nets[0], nets[1])
    assert any(not torch.equal(nets[0][k], nets[2][k]) for k in nets[0])


@pytest.mark.parametrize("name", sorted(set(list_spaces()) - set(WITH_SUPERNET)))
def test_spaces_without_a_supernet_say_why(name: str, ml100k) -> None:
    space = create_space(name, {}, SpaceInputs(11, 8, 64))
    with pytest.raises(ConfigError) as caught:
        build_supernet(space, ml100k.schema)
    assert caught.value.field == "space.name"
    assert "no supernet form" in str(caught.value)


def test_a_spec_outside_the_space_cannot_be_extracted(ml100k) -> None:
    from nas.arch.spec import ArchSpec

    net = build_supernet(create_space("wukong", {}, SpaceInputs.of(ml100k.schema)), ml100k.schema)
    outsider = ArchSpec.from_dict(
        {"embedding_dim": 16, "interaction": [{"block": "dcnv2"}], "top_mlp": []}
    )
    with pytest.raises(ConfigError, match="last.block"):
        net.extract(outsider)


SMALL_ENCODER = {
    "max_depth": 2,
    "sequence": {
        "max_lens": [8, 16],
        "depths": [1, 2],
        "hstu_params": {"num_heads": [1], "qk_dim": [8], "value_dim": [8]},
    },
}


@pytest.mark.parametrize(("name", "options"), [("ctr_stack", {}), ("hstu_seq", SMALL_ENCODER)])
def test_the_relaxation_at_one_hot_probabilities_is_the_members_path(
    ml100k, batch, name, options
) -> None:
    torch.manual_seed(0)
    net = build_supernet(create_space(name, options, SpaceInputs.of(ml100k.schema)), ml100k.schema)
    with torch.no_grad():
        tokens = net.embed(*batch.inputs())
        for spec in members(net, 4, seed=3):
            torch.testing.assert_close(
                net.relaxed(net.one_hot(spec), tokens), net.logits(spec, tokens), atol=1e-6, rtol=0
            )


def test_the_relaxation_mixes_every_choice_with_gradients(ml100k, batch) -> None:
    options = {"max_depth": 2, "embedding_dims": [4, 8], "blocks": ["fm", "dot", "dcnv2"]}
    net = build_supernet(
        create_space("ctr_stack", options, SpaceInputs.of(ml100k.schema)), ml100k.schema
    )
    logits = {n: torch.zeros(len(d.choices), requires_grad=True) for n, d in net.decisions.items()}
    out = net.relaxed(
        {n: torch.softmax(v, 0) for n, v in logits.items()}, net.embed(*batch.inputs())
    )
    torch.nn.functional.binary_cross_entropy_with_logits(out, batch.label).backward()
    for name in ("embedding_dim", "depth", "last.block", "layer0.dcnv2.rank", "top_mlp"):
        assert logits[name].grad.abs().sum() > 0, name


def test_the_dry_build_on_the_meta_device_loads_no_compiler(cache_dir) -> None:
    """Every one-shot and DNAS `nas submit` checks its space by building the supernet on the
    meta device. There, a first ``normal_`` is a Python reference op that imports torch's
    compiler (seconds); the blocks skip those draws on meta tensors. In a fresh Python, as
    the CLI runs it: every registered block's example, and the supernets of ``ctr_stack``
    and ``hstu_seq`` (the shared tokens, history encoder and top; Wukong's and DHEN's take
    15-20 s to build and hold only registered blocks)."""
    import subprocess
    import sys

    script = f"""
import sys
from pathlib import Path
import torch
import blocks
from nas.data import load_dataset
from nas.search.supernet import check_supernet
from search_spaces import SpaceInputs, create_space
with torch.device("meta"):
    for name in blocks.list_blocks():
        blocks.build_block(blocks.get_block(name).config_cls.example())
schema = load_dataset("movielens-100k", Path({str(cache_dir)!r})).schema
for name in ("ctr_stack", "hstu_seq"):
    check_supernet(create_space(name, {{}}, SpaceInputs.of(schema)), schema)
print(",".join(sorted(m for m in sys.modules if m.startswith("torch._dynamo"))))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported {done.stdout.strip()}"
