"""The one-shot job: supernet training resumes exactly, the subnet search scores members
with inherited weights, its ranking agrees with stand-alone training on a toy, and the
picks spread along the front."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from nas.arch.spec import ArchSpec
from search_spaces import SpaceInputs, create_space
from workers import oneshot
from workers.train import TrainConfig
from workers.trial import evaluate

TOY_SPACE = {
    "name": "ctr_stack",
    "options": {
        "embedding_dims": [2, 8],
        "max_depth": 1,
        "blocks": ["dot", "fm", "mlp"],
        "block_params": {"mlp": {"widths": [[1], [16]]}},
        "top_mlps": [[], [8]],
        "top_inputs": ["last"],
    },
}  # 16 members


def settings(**changes) -> dict:
    base = dict(
        space=TOY_SPACE,
        objectives=["ne"],
        seed=0,
        threads=1,
        batch_size=256,
        lr=2e-3,
        embedding_lr=1e-2,
        steps=2000,
        sampling="uniform",
        sandwich_paths=2,
        checkpoint_every=1000,
        subnet_search="evolution",
        subnet_budget=100,
        eval_rows=2000,
        picks=4,
    )
    return base | changes


def quiet(*_) -> None:
    pass


def test_the_supernets_ranking_agrees_with_stand_alone_training(xor) -> None:
    """Every member of a 16-member toy space: NE with the supernet's weights against NE
    trained alone. The label is an XOR of two fields, so members differ a lot."""
    result = oneshot.run(settings(), xor, None, quiet)
    assert result["evaluated"] == 16  # the search stops when the space is spent
    estimated = {s["arch_id"]: s["ne"] for s in result["subnets"]}
    space = create_space("ctr_stack", TOY_SPACE["options"], SpaceInputs.of(xor.schema))
    rng = np.random.default_rng(0)
    members = {spec.arch_id: spec for spec in (space.sample(rng) for _ in range(400))}
    assert set(members) == set(estimated)
    alone = {
        arch: evaluate(spec, xor, TrainConfig(steps=300, batch_size=256, seed=0)).ne
        for arch, spec in members.items()
    }
    tau = kendalltau([estimated[a] for a in members], [alone[a] for a in members]).statistic
    assert tau >= 0.4, tau


@pytest.mark.parametrize(
    ("changes", "phase"),
    [
        ({}, "supernet training"),
        ({"few_shot": ["last.block"], "few_shot_steps": 20}, "few-shot training"),
    ],
    ids=["one supernet", "few-shot"],
)
def test_supernet_training_resumes_exactly(xor, tmp_path, changes, phase) -> None:
    small = settings(steps=60, checkpoint_every=20, subnet_budget=6, **changes)
    unbroken = oneshot.run(small, xor, None, quiet)
    path = str(tmp_path / "supernet.pt")

    def die_at_30(name, done, total):  # with few-shot: in the second family's training
        if name == phase and done == 30:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        oneshot.run(small, xor, path, die_at_30)
    resumed = oneshot.run(small, xor, path, quiet)
    assert resumed["subnets"] == unbroken["subnets"]
    assert resumed["picks"] == unbroken["picks"]
    trained = oneshot.load_supernets(small, xor, path)  # a finished job's, read back
    score = trained.scorer(xor, small["eval_rows"], small["seed"])
    for pick in resumed["picks"]:
        assert score(ArchSpec.from_dict(pick["spec"]))["ne"] == pick["estimate"]["ne"]


def test_few_shot_scores_each_family_with_its_own_weights(xor) -> None:
    """Each family's sub-supernet moves on from the shared one: a member's few-shot score
    is its family's, and differs from the shared supernet's."""
    s = oneshot.OneShotSettings(**settings(steps=40, few_shot=["last.block"], few_shot_steps=20))
    net = oneshot.job_supernet(settings(), xor)
    trained, _ = oneshot.train_supernet(net, xor, s, None, quiet)
    assert [f for (f,) in trained.split.families] == ["dot", "fm", "mlp"]
    shared = oneshot.SubnetScorer(trained.shared, xor, 2000, 0)
    few = trained.scorer(xor, 2000, 0)
    rng = np.random.default_rng(1)
    for family in range(3):
        spec = trained.split.sample(family, rng)
        own = oneshot.SubnetScorer(trained.net(family), xor, 2000, 0)(spec)["ne"]
        assert few(spec)["ne"] == own != shared(spec)["ne"]


@pytest.mark.parametrize("search", ["evolution", "nsga2"])
def test_the_subnet_search_scores_the_searchs_objectives(xor, search) -> None:
    result = oneshot.run(
        settings(steps=50, objectives=["ne", "flops"], subnet_search=search, subnet_budget=12),
        xor,
        None,
        quiet,
    )
    assert 1 <= len(result["picks"]) <= 4
    for subnet in result["subnets"]:
        assert 0 < subnet["ne"] < 2 and 0.0 <= subnet["auc"] <= 1.0
        assert subnet["flops"] >= 0 and subnet["params"] > 0
    for pick in result["picks"]:
        ArchSpec.from_dict(pick["spec"])


def test_picks_spread_along_the_front_then_take_the_next_fronts() -> None:
    spec = ArchSpec.from_dict({"embedding_dim": 4, "interaction": [{"block": "fm"}], "top_mlp": []})
    points = [(0.50, 900), (0.60, 500), (0.70, 100), (0.55, 800), (0.65, 300), (0.66, 950)]
    scored = [(spec, {"ne": ne, "flops": flops}) for ne, flops in points]
    picks = oneshot.pick_front(scored, ["ne", "flops"], 3)
    assert [m["ne"] for _, m in picks] == [0.50, 0.60, 0.70]  # ends and middle of 5
    picks = oneshot.pick_front(scored, ["ne", "flops"], 6)
    assert [m["ne"] for _, m in picks][-1] == 0.66  # the dominated one comes last


def test_the_subnet_search_scores_gauc_and_latency_as_a_trial_is_scored(ml100k) -> None:
    """Objectives a trial's result has beside NE: the AUC per user from the held-out rows'
    users, and the latency the cost model prices for the search's target."""
    from nas.search.objectives import CostSettings, cost_values
    from workers.trial_data import TrialData

    data = TrialData.from_prepared(ml100k, "valid")
    latency = CostSettings("latency", target="h200", batch=512)
    result = oneshot.run(
        settings(
            steps=20,
            objectives=["gauc", "latency"],
            costs=[{"name": "latency", "target": "h200", "batch": 512}],
            subnet_budget=6,
        ),
        data,
        None,
        quiet,
    )
    for subnet in result["subnets"]:
        assert 0.0 < subnet["gauc"] < 1.0 and subnet["gauc"] != subnet["auc"]
    for pick in result["picks"]:
        spec = ArchSpec.from_dict(pick["spec"])
        priced = cost_values([latency], spec, ml100k.schema)["latency"]
        assert pick["estimate"]["latency"] == pytest.approx(priced) and priced > 0
