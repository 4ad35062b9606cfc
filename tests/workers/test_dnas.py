"""The DNAS job: it finds a planted optimum, a larger penalty buys a cheaper expected
architecture, a run resumed from its checkpoint ends as an unbroken one, and DistDNAS's
shards and aggregation behave."""

from __future__ import annotations

import pytest
import torch

from nas.core.errors import ConfigError
from nas.search.supernet.distributions import aggregate, check_relaxation
from workers import dnas

XOR_SPACE = {
    "name": "ctr_stack",
    "options": {
        "embedding_dims": [4, 8],
        "max_depth": 1,
        "blocks": ["dot", "mlp"],
        "block_params": {"mlp": {"widths": [[1]]}},
        "top_mlps": [[]],
        "top_inputs": ["last"],
    },
}


def settings(**changes) -> dict:
    base = dict(
        space=XOR_SPACE,
        seed=0,
        threads=1,
        batch_size=256,
        lr=2e-3,
        embedding_lr=1e-2,
        penalty=0.0,
        steps=300,
        relaxation="gumbel",
        bilevel=True,
        tau_start=2.0,
        tau_end=0.2,
        alpha_lr=0.02,
        arch_batch_size=128,
        warmup=0.2,
        cost_reference=None,
        cost="flops",
        cost_target="h100-sxm",
        cost_precision=None,
        cost_batch=4096,
        checkpoint_every=1000,
        log_every=50,
    )
    return base | changes


def quiet(*_) -> None:
    pass


@pytest.mark.parametrize("relaxation", ["gumbel", "softmax", "straight_through"])
@pytest.mark.parametrize("seed", [0, 1])
def test_without_a_penalty_it_picks_the_block_the_label_needs(xor, relaxation, seed) -> None:
    """The label is an XOR of two fields: a pairwise dot expresses it, a 1-unit MLP cannot."""
    result = dnas.run(settings(relaxation=relaxation, seed=seed), xor, None, quiet)
    assert [layer["block"] for layer in result["decoded"]["interaction"]] == ["dot"]
    dot, mlp = result["probabilities"]["last.block"]
    assert dot > mlp


THREE_WIDTHS = XOR_SPACE | {"options": XOR_SPACE["options"] | {"embedding_dims": [4, 8, 16]}}


@pytest.mark.parametrize("seed", [0, 1])
def test_mixing_two_choices_a_step_still_picks_the_block_the_label_needs(xor, seed) -> None:
    result = dnas.run(settings(space=THREE_WIDTHS, mixed_choices=2, seed=seed), xor, None, quiet)
    assert [layer["block"] for layer in result["decoded"]["interaction"]] == ["dot"]


def test_a_draw_mixing_k_choices_weighs_its_k_likeliest_and_draws_the_same_member(xor) -> None:
    """With mixed_choices: k each decision's sample keeps the k choices the perturbed
    logits rank highest, renormalised, the rest at exactly zero (so the supernet skips
    them); the member drawn is the one the full mixture draws for the same noise, and the
    logits' gradient reaches only the kept choices."""
    runs = {}
    for k in (None, 2):
        s = dnas.DnasSettings(**settings(space=THREE_WIDTHS, mixed_choices=k))
        runs[k] = dnas.Dnas(dnas.job_supernet(settings(space=THREE_WIDTHS), xor), xor, s)
        with torch.no_grad():
            for i, logits in enumerate(runs[k].alpha.values()):
                logits.copy_(torch.linspace(-1.0, 1.0, len(logits)) * (i + 1))
    for _ in range(20):
        member, full = runs[None].draw(0.5)
        same, mixed = runs[2].draw(0.5)
        assert same == member
        for name, weights in mixed.items():
            kept = min(2, len(weights))
            assert int((weights > 0).sum()) == kept
            assert float(weights.detach().sum()) == pytest.approx(1.0)
            top = set(full[name].topk(kept).indices.tolist())
            assert set(weights.nonzero().flatten().tolist()) == top
    width = runs[2].logits("embedding_dim")
    width.grad = None
    weights = mixed["embedding_dim"]
    (weights * torch.arange(3.0)).sum().backward()
    assert ((width.grad != 0) == (weights > 0)).all()


def test_a_larger_penalty_gives_a_cheaper_expected_architecture(xor) -> None:
    space = {
        "name": "ctr_stack",
        "options": {
            "embedding_dims": [4, 8, 16],
            "max_depth": 1,
            "blocks": ["dot", "fm", "mlp"],
            "block_params": {"mlp": {"widths": [[1], [32]]}},
            "top_mlps": [[], [16]],
            "top_inputs": ["last", "all"],
        },
    }
    costs = []
    for penalty in (0.0, 0.1, 1.0, 10.0):
        result = dnas.run(settings(space=space, penalty=penalty, steps=200), xor, None, quiet)
        costs.append(result["expected_cost"])
        assert result["trajectory"]["expected_cost"][-1] == pytest.approx(costs[-1])
    assert costs == sorted(costs, reverse=True), costs
    assert costs[-1] < costs[0] / 3


@pytest.mark.parametrize("mixed", [None, 2])
def test_a_resumed_run_ends_as_an_unbroken_one(xor, tmp_path, mixed) -> None:
    def settings_(**changes):
        return settings(space=THREE_WIDTHS, mixed_choices=mixed, **changes)

    unbroken = dnas.run(settings_(steps=60, checkpoint_every=20), xor, None, quiet)
    path = str(tmp_path / "dnas.pt")

    def die_at_30(phase, done, total):
        if done == 30:
            raise KeyboardInterrupt  # the process dies between checkpoints (20 and 40)

    with pytest.raises(KeyboardInterrupt):
        dnas.run(settings_(steps=60, checkpoint_every=20), xor, path, die_at_30)
    assert torch.load(path, weights_only=True)["step"] == 20
    resumed = dnas.run(settings_(steps=60, checkpoint_every=20), xor, path, quiet)
    assert resumed["probabilities"] == unbroken["probabilities"]
    assert resumed["decoded"] == unbroken["decoded"]
    assert resumed["trajectory"]["alpha"] == unbroken["trajectory"]["alpha"]


def test_a_mixture_too_large_for_a_step_is_refused_by_field(ml100k) -> None:
    from nas.search.supernet import build_supernet
    from search_spaces import SpaceInputs, create_space

    net = build_supernet(create_space("wukong", {}, SpaceInputs.of(ml100k.schema)), ml100k.schema)
    with pytest.raises(ConfigError) as caught:
        check_relaxation(net, "gumbel")
    assert caught.value.field == "strategy.options.relaxation"
    assert "straight_through" in str(caught.value)
    check_relaxation(net, "straight_through")


def test_mixing_k_choices_is_sized_by_what_a_step_of_k_evaluates(ml100k) -> None:
    """A space too large to mix every choice is affordable mixing two a decision; where even
    two are too many (Wukong), the refusal names mixed_choices."""
    from nas.search.supernet import check_supernet
    from search_spaces import SpaceInputs, create_space

    def supernet(name: str, options: dict):
        schema = ml100k.schema
        return check_supernet(create_space(name, options, SpaceInputs.of(schema)), schema)

    deep = supernet("ctr_stack", {"max_depth": 4})
    with pytest.raises(ConfigError) as caught:
        check_relaxation(deep, "gumbel")
    assert caught.value.field == "strategy.options.relaxation"
    check_relaxation(deep, "gumbel", mixed_choices=2)
    every = {d.name: [True] * len(d.choices) for d in deep.space.decisions}
    assert deep.relaxed_evaluations(every) == deep.relaxed_evaluations()
    one = {d.name: [i == 0 for i in range(len(d.choices))] for d in deep.space.decisions}
    assert deep.relaxed_evaluations(one) < deep.relaxed_evaluations(every)
    with pytest.raises(ConfigError) as caught:
        check_relaxation(supernet("wukong", {}), "gumbel", mixed_choices=2)
    assert caught.value.field == "strategy.options.mixed_choices"
    assert "with mixed_choices: 2 evaluates up to" in str(caught.value)
    assert "a smaller mixed_choices" not in str(caught.value)  # 2 is the least


def test_shards_are_chronological_slices_that_cover_the_training_split(ml100k) -> None:
    from workers.trial_data import TrialData

    data = TrialData.from_prepared(ml100k)
    train = data.features("train")
    shards = [data.shard(i, 4) for i in range(4)]
    assert sum(len(s) for s in shards) == len(train)
    ends = [(int(s.history.now.min()), int(s.history.now.max())) for s in shards]
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:], strict=False)), ends


def test_aggregation_by_mean_and_by_vote() -> None:
    from search_spaces.decisions import Decision

    decisions = [Decision("x", ("a", "b", "c"))]
    runs = [
        {"probabilities": {"x": [0.5, 0.45, 0.05]}},
        {"probabilities": {"x": [0.5, 0.45, 0.05]}},
        {"probabilities": {"x": [0.0, 0.9, 0.1]}},
    ]
    mean = aggregate(runs, decisions, "mean")["x"]
    vote = aggregate(runs, decisions, "vote")["x"]
    assert max(range(3), key=mean.__getitem__) == 1  # the mean favours b (0.6 vs 0.33)
    assert max(range(3), key=vote.__getitem__) == 0  # two of three shards chose a
    assert sum(vote) == pytest.approx(1.0)


def test_the_probabilities_chart_follows_the_logged_logits(xor) -> None:
    from dashboards.pareto_html import probabilities_figure

    result = dnas.run(settings(steps=120, log_every=20), xor, None, quiet)
    trajectory = result["trajectory"]
    figure = probabilities_figure(trajectory, "dnas-l0")
    decisions = list(trajectory["alpha"])
    assert [a.text for a in figure.layout.annotations] == decisions  # one panel each
    traces = iter(figure.data)
    for decision in decisions:
        lines = [next(traces) for _ in trajectory["alpha"][decision]]
        assert [t.name for t in lines] == list(trajectory["alpha"][decision])
        assert all(list(t.x) == trajectory["step"] for t in lines)
        totals = torch.tensor([list(t.y) for t in lines]).sum(0)
        torch.testing.assert_close(totals, torch.ones_like(totals), rtol=0, atol=1e-9)
        final = [t.y[-1] for t in lines]  # the run's final probabilities, at temperature 1
        assert final == pytest.approx(result["probabilities"][decision], abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_settled_step_is_where_the_logged_logits_began_to_decode_the_final_member(
    xor, seed
) -> None:
    """What `nas status` says of a DNAS job (held from step N, or still changing), read
    again from the logged logits: from that step on every log decodes the final member,
    and the log before it another one."""
    from nas.search.supernet.distributions import decode
    from search_spaces import SpaceInputs, create_space

    result = dnas.run(
        settings(space=THREE_WIDTHS, steps=120, log_every=5, seed=seed), xor, None, quiet
    )
    space = create_space(THREE_WIDTHS["name"], THREE_WIDTHS["options"], SpaceInputs.of(xor.schema))
    trajectory = result["trajectory"]
    decoded = [
        decode(space, {d: [v[i] for v in c.values()] for d, c in trajectory["alpha"].items()})
        for i in range(len(trajectory["step"]))
    ]
    settled = result["settled_from_step"]
    first = trajectory["step"].index(settled)
    assert {spec.arch_id for spec in decoded[first:]} == {result["arch_id"]}
    assert first == 0 or decoded[first - 1].arch_id != result["arch_id"]


def test_a_latency_cost_prices_the_supernet_with_the_cost_model(xor) -> None:
    """cost: latency puts the cost model's microseconds in the DNAS loss; a larger penalty
    still buys a cheaper expected architecture, now in latency."""
    space = {
        "name": "ctr_stack",
        "options": {
            "embedding_dims": [4, 16],
            "max_depth": 1,
            "blocks": ["dot", "mlp"],
            "block_params": {"mlp": {"widths": [[1], [64]]}},
            "top_mlps": [[], [64]],
            "top_inputs": ["last"],
        },
    }
    latency = {"cost": "latency", "cost_target": "h100-sxm", "cost_batch": 4096}
    costs = []
    for penalty in (0.0, 10.0):
        result = dnas.run(
            settings(space=space, penalty=penalty, steps=200, **latency), xor, None, quiet
        )
        costs.append(result["expected_cost"])
    assert 0 < costs[1] < costs[0]
    assert costs[0] < 1.0  # microseconds per example on an H100, not FLOPs


def test_bad_latency_cost_options_are_refused() -> None:
    from nas.search.strategies import check_options

    with pytest.raises(ConfigError, match="unknown target 'h300'"):
        check_options("dnas", {"cost": "latency", "cost_target": "h300"})
    with pytest.raises(ConfigError, match="prices fp32"):
        check_options("dnas", {"cost": "latency", "cost_target": "cpu", "cost_precision": "bf16"})


def test_mixed_choices_outside_gumbel_or_below_two_is_refused_by_field() -> None:
    from nas.search.strategies import check_options

    for relaxation in ("softmax", "straight_through"):
        with pytest.raises(ConfigError, match="gumbel only") as caught:
            check_options("dnas", {"relaxation": relaxation, "mixed_choices": 2})
        assert caught.value.field == "strategy.options.mixed_choices"
    with pytest.raises(ConfigError, match="greater than or equal to 2"):
        check_options("distdnas", {"mixed_choices": 1})
    assert check_options("distdnas", {"mixed_choices": 2}).mixed_choices == 2
