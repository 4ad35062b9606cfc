"""Every registered strategy that runs setup jobs (oneshot, dnas, distdnas) passes these,
fed results shaped like its workers' own: jobs have unique short names and JSON settings,
are listed until done, ``ask`` waits on them for what needs them, then gives distinct
members of the space until it says it is spent; state saved between jobs resumes exactly;
spaces without a supernet are refused up front. (The jobs themselves: tests/workers.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from nas.core.errors import ConfigError
from nas.search.objectives import get_objective
from nas.search.strategies import (
    SpaceExhausted,
    StrategyContext,
    Waiting,
    create_strategy,
    get_strategy,
    list_strategies,
)
from search_spaces import SpaceInputs, create_space

INPUTS = SpaceInputs(11, 8, 64)
JOB_STRATEGIES = ["distdnas", "dnas", "oneshot"]


def context(seed: int = 0) -> StrategyContext:
    return StrategyContext(
        space=create_space("ctr_stack", {"max_depth": 2}, INPUTS),
        objectives=(get_objective("ne"), get_objective("flops")),
        seed=seed,
        train={"batch_size": 256, "lr": 1e-3, "embedding_lr": 1e-2, "threads": 1},
        budget=5,
    )


def fake_result(strategy, job, rng: np.random.Generator) -> dict:
    """What the job's worker returns, with random numbers."""
    space = strategy.space
    if job.kind == "supernet":
        picks = [space.sample(rng) for _ in range(job.settings["picks"])]
        return {
            "picks": [{"spec": s.to_dict(), "estimate": {"ne": 0.8, "flops": 1.0}} for s in picks]
        }
    probabilities = {d.name: list(rng.dirichlet(np.ones(len(d.choices)))) for d in space.decisions}
    return {
        "penalty": job.settings["penalty"],
        "probabilities": probabilities,
        "expected_cost": float(rng.random()),
        "arch_id": "x",
    }


def drain(strategy, rng) -> list[str]:
    while jobs := strategy.jobs():
        for job in jobs:
            strategy.job_done(job, fake_result(strategy, job, rng))
    asked = []
    while True:
        try:
            spec = strategy.ask()
        except SpaceExhausted as err:
            assert strategy.name in str(err)
            return asked
        asked.append(spec.arch_id)
        strategy.tell(spec, [0.8, 1e5])


def test_the_list_is_complete() -> None:
    sampling = {"random", "evolution", "optuna"}
    assert set(list_strategies()) == sampling | set(JOB_STRATEGIES)


@pytest.mark.parametrize("name", JOB_STRATEGIES)
def test_jobs_are_named_once_with_json_settings(name) -> None:
    strategy = create_strategy(name, {}, context())
    jobs = strategy.jobs()
    names = [job.name for job in jobs]
    assert names and len(set(names)) == len(names)
    assert all(len(n) <= 32 for n in names)
    for job in jobs:
        assert job.kind in ("supernet", "dnas")
        assert json.loads(json.dumps(job.settings)) == job.settings
        assert job.settings["space"]["name"] == "ctr_stack"
    with pytest.raises(Waiting, match="still to finish"):
        strategy.ask()


@pytest.mark.parametrize("name", JOB_STRATEGIES)
def test_after_its_jobs_it_asks_distinct_members_then_says_it_is_spent(name) -> None:
    strategy = create_strategy(name, {}, context())
    asked = drain(strategy, np.random.default_rng(0))
    assert asked and len(set(asked)) == len(asked)
    assert not strategy.jobs()
    assert strategy.summary()
    for arch_id in asked:
        spec = next(s for s in _members(strategy) if s.arch_id == arch_id)
        strategy.space.encode(spec)  # a member of the space
        assert strategy.estimate(spec)


def _members(strategy):
    if hasattr(strategy, "picks"):
        return strategy.picks
    return [s for members in strategy.decoded.values() for s in members]


@pytest.mark.parametrize("name", JOB_STRATEGIES)
def test_state_saved_between_jobs_resumes_exactly(name) -> None:
    whole = drain(create_strategy(name, {}, context(3)), np.random.default_rng(1))
    first = create_strategy(name, {}, context(3))
    rng = np.random.default_rng(1)
    jobs = first.jobs()
    first.job_done(jobs[0], fake_result(first, jobs[0], rng))
    state = json.loads(json.dumps(first.state_dict()))  # as the registry stores it
    second = create_strategy(name, {}, context(3))
    second.load_state_dict(state)
    assert [j.name for j in second.jobs()] == [j.name for j in jobs[1:]]
    assert drain(second, rng) == whole


@pytest.mark.parametrize("name", ["dnas", "distdnas"])
def test_a_penalty_s_first_member_comes_as_its_jobs_end_its_others_after_every_first(
    name,
) -> None:
    options = {"lambdas": [0.0, 0.1, 0.5], "members_per_penalty": 2}
    if name == "distdnas":
        options["shards"] = 2
    strategy = create_strategy(name, options, context())
    rng = np.random.default_rng(5)
    jobs = {job.name: job for job in strategy.jobs()}
    later = [n for n in jobs if "l0.1" in n]  # lambda 0.1's jobs end last
    for job_name in [n for n in jobs if n not in later]:
        strategy.job_done(jobs[job_name], fake_result(strategy, jobs[job_name], rng))
    if name == "distdnas":  # one of 0.1's two shards: still not decoded
        strategy.job_done(jobs[later[0]], fake_result(strategy, jobs[later[0]], rng))
    asked = []
    with pytest.raises(Waiting, match="lambda 0.1 "):
        while True:
            asked.append(strategy.ask())
    firsts = [strategy.decoded[p][0].arch_id for p in ("0", "0.5")]
    assert [s.arch_id for s in asked] == list(dict.fromkeys(firsts))  # no second member yet
    assert strategy.offers() is None  # not known while a penalty is undecoded
    # Once lambda 0.1's last job runs, second members may fill free workers, as long as the
    # budget (5) keeps a place for 0.1's first.
    strategy.job_started(jobs[later[-1]])
    ahead = []
    with pytest.raises(Waiting):
        while True:
            ahead.append(strategy.ask())
    assert len(ahead) == 5 - len(asked) - 1
    seconds = {strategy.decoded[p][1].arch_id for p in ("0", "0.5")}
    assert {s.arch_id for s in ahead} <= seconds
    asked += ahead
    for job_name in later[len(later) - 1 :]:
        strategy.job_done(jobs[job_name], fake_result(strategy, jobs[job_name], rng))
    rest = drain(strategy, rng)
    if (first := strategy.decoded["0.1"][0].arch_id) not in firsts:
        assert rest[0] == first  # every penalty's first before any second
    assert len(asked) + len(rest) == strategy.offers()


def test_oneshot_gives_its_calibration_members_before_its_supernet_is_trained() -> None:
    strategy = create_strategy("oneshot", {"calibration": 3, "top_k": 2}, context())
    calibration = [strategy.ask() for _ in range(3)]
    assert [s.arch_id for s in calibration] == [s.arch_id for s in strategy.calibration]
    with pytest.raises(Waiting, match="supernet job"):
        strategy.ask()
    assert strategy.jobs() and strategy.offers() is None


def test_distdnas_runs_every_penalty_on_every_shard_with_a_share_of_the_steps() -> None:
    strategy = create_strategy(
        "distdnas", {"lambdas": [0.0, 0.1], "shards": 3, "steps": 300}, context()
    )
    jobs = strategy.jobs()
    assert [(j.settings["penalty"], j.settings["shard"]) for j in jobs] == [
        (p, [s, 3]) for p in (0.0, 0.1) for s in range(3)
    ]
    assert {j.settings["steps"] for j in jobs} == {100}


@pytest.mark.parametrize("name", JOB_STRATEGIES)
def test_a_space_without_a_supernet_is_refused_before_anything_runs(name, ml1m) -> None:
    options = get_strategy(name).Options()
    with pytest.raises(ConfigError) as caught:
        get_strategy(name).check(options, create_space("rocs", {}, INPUTS), ml1m.schema, 5)
    assert caught.value.field == "space.name"


def test_few_shot_splits_by_decisions_of_the_space(ml1m) -> None:
    oneshot = get_strategy("oneshot")
    space = create_space("ctr_stack", {"max_depth": 2}, INPUTS)
    oneshot.check(oneshot.Options(few_shot=["depth", "last.block"]), space, ml1m.schema, 5)
    with pytest.raises(ConfigError) as caught:
        oneshot.check(oneshot.Options(few_shot=["last.blocks"]), space, ml1m.schema, 5)
    assert caught.value.field == "strategy.options.few_shot"
    assert "last.block" in caught.value.message.split("its decisions are")[1]


@pytest.mark.parametrize(
    ("name", "options", "field"),
    [
        ("dnas", {"lambdas": [-1.0]}, "strategy.options.lambdas"),
        ("dnas", {"lambdas": []}, "strategy.options.lambdas"),
        ("dnas", {"relaxation": "hard"}, "strategy.options.relaxation"),
        ("distdnas", {"shards": 1}, "strategy.options.shards"),
        ("distdnas", {"aggregate": "max"}, "strategy.options.aggregate"),
        ("oneshot", {"sampling": "random"}, "strategy.options.sampling"),
        ("oneshot", {"subnet_budget": 0}, "strategy.options.subnet_budget"),
    ],
)
def test_bad_options_name_the_field(name, options, field) -> None:
    from nas.search.strategies import check_options

    with pytest.raises(ConfigError) as caught:
        check_options(name, options)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("name", "options", "threads"),
    [
        ("oneshot", {}, 4),  # one job: the 4 trials' CPUs are its
        ("dnas", {"lambdas": [0.0, 0.1]}, 2),  # two jobs share them
        ("dnas", {"lambdas": [0.0, 0.1, 0.2, 0.3, 0.4]}, 1),
        ("distdnas", {"lambdas": [0.0], "shards": 2}, 2),
    ],
)
def test_jobs_take_the_cpus_fewer_jobs_leave_free(name, options, threads) -> None:
    import dataclasses

    ctx = dataclasses.replace(context(), concurrency=4)
    strategy = create_strategy(name, options, ctx)
    jobs = strategy.jobs()
    assert {job.settings["threads"] for job in jobs} == {threads}
    strategy.job_done(jobs[0], fake_result(strategy, jobs[0], np.random.default_rng(0)))
    assert {job.settings["threads"] for job in strategy.jobs()} <= {threads}  # as they began


def _assignments(decisions, values=None, at=0):
    """Every assignment of the active decisions, by brute force."""
    values = values or {}
    if at == len(decisions):
        yield values
        return
    d = decisions[at]
    if not d.active(values):
        yield from _assignments(decisions, values, at + 1)
        return
    for choice in d.choices:
        yield from _assignments(decisions, {**values, d.name: choice}, at + 1)


def _probability(decisions, probabilities, values) -> float:
    return float(
        np.prod(
            [probabilities[d.name][d.index(values[d.name])] for d in decisions if d.name in values]
        )
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_most_likely_members_are_those_of_highest_probability(seed) -> None:
    from nas.search.supernet.distributions import most_likely

    space = create_space("ctr_stack", {"max_depth": 2}, INPUTS)
    rng = np.random.default_rng(seed)
    # Peaked distributions, as DNAS learns them, so that the order is not a near-tie.
    probabilities = {
        d.name: list(rng.dirichlet(np.full(len(d.choices), 0.5))) for d in space.decisions
    }
    every = sorted(
        _assignments(space.decisions),
        key=lambda v: -_probability(space.decisions, probabilities, v),
    )
    found = most_likely(space, probabilities, 7)
    assert [space.encode(s) for s in found] == every[:7]
    assert len(most_likely(space, probabilities, len(every) + 5)) == len(every)


def test_members_per_penalty_offers_each_penalty_s_next_likeliest_after_every_first() -> None:
    strategy = create_strategy("dnas", {"lambdas": [0.0, 0.5], "members_per_penalty": 3}, context())
    rng = np.random.default_rng(4)
    for job in strategy.jobs():
        strategy.job_done(job, fake_result(strategy, job, rng))
    first = {p: members[0].arch_id for p, members in strategy.decoded.items()}
    assert all(len(members) == 3 for members in strategy.decoded.values())
    asked = drain(strategy, rng)
    assert set(asked[:2]) == set(first.values())  # every penalty's decoded member first
    assert len(asked) == strategy.offers() <= 6
    assert strategy.estimate(strategy.decoded["0.5"][2]) == {"dnas_penalty": 0.5, "dnas_rank": 3.0}
