"""The cost model (nas/arch/cost): the roofline is monotone in shape, FP8 never wins where it
cannot amortise its quantisation (and does where it can), a request prices its request side
once, every block marks its weight operand, and latency objectives are checked up front."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blocks
from blocks.gemm import Gemm
from nas.arch.cost import batch_estimate, gemm_estimate, get_target, request_estimate
from nas.arch.cost.candidate import request_parts
from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.search.objectives import cost_values
from nas.service.config import validate_config
from tests.conftest import runs_with_store
from tests.test_glm_model import STACKED

GPUS = ("h100-sxm", "h200")
sizes = st.integers(1, 4096)


@settings(max_examples=200, deadline=None)
@given(sizes, sizes, sizes, st.integers(1, 64), st.sampled_from(["a", "b", "none"]))
def test_the_estimate_never_falls_as_a_gemm_grows(m, n, k, count, weight) -> None:
    gemm = Gemm(m, n, k, count, weight=weight)
    for name in GPUS:
        target = get_target(name)
        for precision in ("bf16", "fp8"):
            base = gemm_estimate(gemm, target, precision).seconds
            for bigger in ({"m": m + 1}, {"n": n + 1}, {"k": k + 1}, {"count": count + 1}):
                grown = gemm_estimate(dataclasses.replace(gemm, **bigger), target, precision)
                assert grown.seconds >= base


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 64), st.integers(1, 16))
def test_fp8_is_never_faster_for_a_gemm_too_small_to_amortise_its_quantisation(m, n, k, count):
    for name in GPUS:
        target = get_target(name)
        for weight in ("a", "b", "none"):
            gemm = Gemm(m, n, k, count, weight=weight)
            fp8, bf16 = gemm_estimate(gemm, target, "fp8"), gemm_estimate(gemm, target, "bf16")
            assert fp8.seconds > bf16.seconds
            assert fp8.quantise_seconds > 0 and fp8.launches == bf16.launches + 1


def test_fp8_pays_where_the_gemm_is_large() -> None:
    gemm = Gemm(8192, 8192, 8192)
    for name in GPUS:
        target = get_target(name)
        speedup = (
            gemm_estimate(gemm, target, "bf16").seconds / gemm_estimate(gemm, target, "fp8").seconds
        )
        assert 1.5 < speedup < 2.0  # compute-bound: twice the peak, less the quantising


def test_a_target_only_prices_its_precisions() -> None:
    with pytest.raises(ConfigError, match="prices bf16, fp8"):
        gemm_estimate(Gemm(8, 8, 8), get_target("h200"), "fp32")
    with pytest.raises(ConfigError, match="unknown target 'h300'"):
        get_target("h300")


@pytest.mark.parametrize("candidates", [1, 7, 100])
def test_a_request_runs_its_request_side_once(ml100k, candidates) -> None:
    """Per request = request side + N x candidate side: in FLOPs exactly as the model runs
    it, and in estimated time the request side of a GLM model is amortised over N."""
    for spec in (ArchSpec.from_dict(STACKED), ArchSpec.load("examples/specs/dcnv2.json")):
        model = build_model(spec, ml100k.schema)
        parts = request_parts(spec, ml100k.schema, candidates)
        flops = sum(g.flops for gemms, _ in parts for g in gemms)
        request, candidate = model.flops_by_side()
        assert flops == model.flops_per_request(candidates) == request + candidates * candidate
    spec, target = ArchSpec.from_dict(STACKED), get_target("h100-sxm")
    per_candidate = [
        request_estimate(spec, ml100k.schema, target, "bf16", n).seconds / n for n in (1, 10, 100)
    ]
    assert per_candidate == sorted(per_candidate, reverse=True)


def test_every_block_marks_which_operand_is_a_weight() -> None:
    """An activation-by-activation product (attention, dot, FM) has no weight to quantise
    ahead of time; a linear layer has exactly one."""
    found = set()
    for name in blocks.list_blocks():
        config = blocks.get_block(name).config_cls.example()
        for gemm in config.gemms(2):
            found.add(gemm.weight)
            assert gemm.weight_elements + gemm.activation_elements > 0
    assert found == {"a", "b", "none"}
    dot = blocks.get_block("dot").config_cls.example()
    assert {g.weight for g in dot.gemms(4)} == {"none"}


def test_the_cpu_target_is_measured_once_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(tmp_path))
    first = get_target("cpu", 1)
    assert first.peak_flops["fp32"] > 1e8 and first.memory_bytes_per_s > 1e8
    assert 0 < first.launch_s < 1e-3
    (cached,) = (tmp_path / "cost").iterdir()
    assert get_target("cpu", 1) == first and cached.exists()


def _config(objective) -> dict:
    return {"name": "c", "space": {"name": "ctr_stack"}, "objectives": ["ne", objective]}


@pytest.mark.parametrize(
    ("objective", "words"),
    [
        ({"name": "latency"}, "objectives[1].target: latency needs a target"),
        ({"name": "latency", "target": "h300"}, "unknown target 'h300'"),
        ({"name": "latency", "target": "cpu", "precision": "fp8"}, "prices fp32; got 'fp8'"),
        ({"name": "latency", "target": "cpu", "precision": "fp8-dispatch"}, "on a GPU target"),
        (
            {"name": "serving_latency", "target": "cpu", "precision": "fp8-dispatch"},
            "fp8-dispatch (each candidate probed",
        ),
        ({"name": "latency", "target": "h200", "candidates": 5}, "latency does not take it"),
        ({"name": "serving_latency", "target": "h200", "batch": 5}, "does not take it"),
        ({"name": "flops", "target": "h200"}, "objectives[1].target: only latency"),
        ({"name": "latency", "target": "h200", "batch": 0}, "batch"),
    ],
)
def test_bad_latency_objectives_are_refused_naming_the_field(objective, words) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config(_config(objective))
    assert words in str(caught.value)


def test_latency_objectives_are_priced_per_spec(ml100k) -> None:
    config = validate_config(
        {
            "name": "c",
            "space": {"name": "ctr_stack"},
            "objectives": [
                "ne",
                {"name": "latency", "target": "h100-sxm", "precision": "fp8", "batch": 4096},
                {"name": "serving_latency", "target": "h200", "candidates": 50},
            ],
        }
    )
    small, large = (ArchSpec.load(f"examples/specs/{n}.json") for n in ("deepfm", "autoint"))
    values = [cost_values(config.objectives, s, ml100k.schema) for s in (small, large)]
    assert set(values[0]) == {"latency", "serving_latency"}
    assert all(values[0][k] < values[1][k] for k in values[0])  # AutoInt does more work
    expected = batch_estimate(small, ml100k.schema, get_target("h100-sxm"), "fp8", 4096)
    assert values[0]["latency"] == pytest.approx(expected.seconds / 4096 * 1e6)


@pytest.mark.slow
def test_a_search_on_latency_records_it_for_every_trial_and_fronts_on_it(tmp_path) -> None:
    import json

    from mlflow import MlflowClient

    from nas.data import load_dataset
    from tests.test_search import nas, registry_of, write_search

    # Few trials: each is probed for FP8 (an NE per linear site) and timed on this CPU.
    path = write_search(tmp_path, candidates=3, steps=30, baselines="false")
    path.write_text(
        path.read_text()
        + "objectives: [ne, {name: latency, target: h100-sxm, precision: fp8-dispatch,"
        " batch: 65536}, {name: serving_latency, target: cpu}]\n"
    )
    runs = runs_with_store(tmp_path)
    done = nas(runs, "submit", str(path), "--json")
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    trials = [t for t in registry_of(runs).trials(search.id) if t.status == "completed"]
    assert len(trials) == 3
    schema = load_dataset("movielens-100k").schema
    for t in trials:
        assert t.values[1] == t.metrics["latency"] > 0 and t.values[2] > 0
        # fp8-dispatch: every trial was probed; its latency is BF16's less what FP8 saves
        # at the sites the plan put in FP8 (only safe ones).
        plan = t.metrics["fp8"]
        assert plan["sites"] and plan["target"] == "h100-sxm" and plan["batch"] == 65536
        assert all(s["safe"] for s in plan["sites"] if s["precision"] == "fp8")
        spec = ArchSpec.from_dict(t.spec)
        bf16 = batch_estimate(spec, schema, get_target("h100-sxm"), "bf16", 65536).seconds
        saved = plan["latency_bf16_us"] - plan["latency_dispatch_us"]
        assert t.metrics["latency"] == pytest.approx((bf16 * 1e6 - saved) / 65536)
        assert saved >= 0
    front = json.loads(nas(runs, "pareto", search.id, "--json").stdout)
    assert list(front["objectives"]) == ["ne", "latency", "serving_latency"]
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    child = client.get_run(trials[0].mlflow_run_id)
    assert child.data.metrics["latency"] == pytest.approx(trials[0].metrics["latency"])
    plan = trials[0].metrics["fp8"]
    assert child.data.metrics["fp8_latency_dispatch_us"] == pytest.approx(
        plan["latency_dispatch_us"]
    )
    assert "fp8_plan.json" in {a.path for a in client.list_artifacts(child.info.run_id)}
    # The cpu target was measured once, under the runs folder.
    assert len(list((runs / "cost").glob("cpu-*.json"))) == 1
    # Retrained, each training is probed too; the registered model serves its plan.
    flags = ("--pick", "best", "--seeds", "1", "--steps", "30", "--no-baselines")
    done = nas(runs, "retrain", search.id, *flags, "--register", "fast8", "--json")
    assert done.returncode == 0, done.stderr
    retrain = next(s for s in registry_of(runs).list_searches() if s.id != search.id)
    (pair,) = registry_of(runs).trials(retrain.id)
    planned = [s["name"] for s in pair.metrics["fp8"]["sites"] if s["precision"] == "fp8"]
    model = "models:/fast8@champion"
    exported = nas(runs, "export", model, "--out", str(tmp_path / "out"), "--json")
    assert exported.returncode == 0, exported.stderr
    served = json.loads((tmp_path / "out" / "recnas_model.json").read_text())
    assert served["fp8_sites"] == planned and served["precision"] == "fp8-dispatch"
    assert json.loads(exported.stdout)["precision"].startswith(f"fp8-dispatch: {len(planned)}")


def test_a_trial_is_probed_when_the_search_asks_or_an_objective_needs_it() -> None:
    from nas.search.objectives import fp8_probe_settings

    plain = validate_config(_config("flops"))
    assert fp8_probe_settings(plain.objectives, plain.fp8_probe) is None
    asked = validate_config(_config("flops") | {"fp8_probe": True})
    assert fp8_probe_settings(asked.objectives, asked.fp8_probe)["target"] == "h100-sxm"
    dispatch = {"name": "latency", "target": "h200", "precision": "fp8-dispatch", "batch": 512}
    needed = validate_config(_config(dispatch))
    settings = fp8_probe_settings(needed.objectives, needed.fp8_probe)
    assert (settings["target"], settings["batch"]) == ("h200", 512)
