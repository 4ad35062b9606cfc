"""The FP8 probe: it finds a planted unsafe site, its dispatch plan never puts an unsafe site
in FP8 (and uses FP8 exactly where it is safe and faster), and `nas fp8 probe` runs on real
data, logs to MLflow and refuses bad input."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from nas.arch.cost import get_target
from tests.conftest import runs_with_store
from workers.fp8_probe import (
    ProbeResult,
    Site,
    fp8_gemm_error,
    plan_dispatch,
    probe,
    quantise_dequantise,
)
from workers.metrics import binary_metrics


class Planted(nn.Module):
    """logit = 4 (x0 + x1 / 2), through two linear layers. Input channel 15 carries a value
    1e6 times larger than the rest, cancelled exactly by ``first``'s weight: FP32 does not
    care, but a quantised input to ``first`` loses every small value next to it."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(16, 16, bias=False), nn.Linear(16, 1, bias=False)
        with torch.no_grad():
            self.first.weight.copy_(torch.eye(16))
            self.first.weight[15, 15] = 1e-6
            self.second.weight.zero_()
            self.second.weight[0, :2] = torch.tensor([4.0, 2.0])

    def forward(self, x):
        return self.second(torch.relu(self.first(x)) - torch.relu(-self.first(x))).view(-1)


def planted_data(rows: int = 4000):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 16, generator=g)
    label = (torch.rand(rows, generator=g) < torch.sigmoid(4 * (x[:, 0] + x[:, 1] / 2))).float()
    x[:, 15] *= 1e6
    return x, label


def test_the_probe_finds_the_planted_unsafe_site() -> None:
    model = Planted()
    x, label = planted_data()

    def ne(candidate) -> float:
        with torch.no_grad():
            return binary_metrics(label, candidate(x), float(label.mean()))["ne"]

    result = probe(model, [(x[:1000],)], ne, 1e-3, get_target("h100-sxm"), 4096)
    sites = {s.name: s for s in result.sites}
    assert set(sites) == {"first", "second"}
    assert sites["first"].outlier_ratio > 1000 and sites["second"].outlier_ratio < 10
    assert not sites["first"].safe and sites["first"].ne_delta > 0.05
    assert sites["second"].safe and abs(sites["second"].ne_delta) <= 1e-3
    assert sites["first"].error_tensor > 10 * sites["second"].error_tensor
    assert result.ne_all_safe_fp8 == pytest.approx(result.ne, abs=1e-3)  # the safe one only
    assert all(s.precision == "bf16" for s in result.sites if not s.safe)
    # The plan, run for real: nothing here is big enough for FP8 to pay, so nothing moved.
    assert result.sites_in_fp8 == [] and result.ne_dispatched == pytest.approx(result.ne)
    # The model is left as it was: no hook stays behind.
    assert ne(model) == pytest.approx(result.ne)


def test_fp8_error_and_quantisation_behave() -> None:
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(64, 32, generator=g), torch.randn(16, 32, generator=g)
    for scaling in ("tensor", "row"):
        assert 0 < fp8_gemm_error(x, w, scaling) < 0.1
        q = quantise_dequantise(x, scaling)
        assert torch.allclose(q, x, rtol=0.07, atol=1e-6) and not torch.equal(q, x)
    spiky = x.clone()
    spiky[0, 0] = 1e5  # one outlier row: per-row scales keep the other rows
    assert fp8_gemm_error(spiky, w, "row") < fp8_gemm_error(spiky, w, "tensor")
    # Each is the error of the GEMM of the operands through e4m3 and back, to rounding
    # (the per-tensor scale runs as the same scale on every row: the CPU's fast path).
    for scaling in ("tensor", "row"):
        a, b = quantise_dequantise(spiky, scaling), quantise_dequantise(w, scaling)
        exact = spiky @ w.t()
        want = float((a @ b.t() - exact).norm() / exact.norm())
        assert fp8_gemm_error(spiky, w, scaling) == pytest.approx(want, rel=1e-4)


dims = st.integers(1, 16384)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(dims, dims, st.floats(0.01, 64), st.booleans()), min_size=1, max_size=8),
    st.sampled_from(["h100-sxm", "h200"]),
    st.integers(1, 1 << 16),
)
def test_the_plan_puts_fp8_only_where_it_is_safe_and_faster(shapes, target_name, batch) -> None:
    sites = [Site(f"s{i}", k, n, rows, safe=safe) for i, (k, n, rows, safe) in enumerate(shapes)]
    result = ProbeResult(0.8, 0.8, 1e-3, sites)
    plan_dispatch(result, get_target(target_name), batch)
    for s in result.sites:
        if not s.safe:
            assert s.precision == "bf16"
        else:
            assert (s.precision == "fp8") == (s.fp8_us < s.bf16_us)
    assert result.latency_dispatch_us <= result.latency_bf16_us + 1e-9
    assert result.latency_dispatch_us == pytest.approx(
        sum(min(s.bf16_us, s.fp8_us) if s.safe else s.bf16_us for s in result.sites)
    )


@pytest.mark.slow
def test_nas_fp8_probe_on_real_data_logs_its_tables(tmp_path) -> None:
    from mlflow import MlflowClient

    from tests.test_search import nas, nas_here

    runs = runs_with_store(tmp_path)
    done = nas(
        runs, "fp8", "probe", "examples/specs/dcnv2.json", "--dataset", "movielens-100k",
        "--steps", "60", "--rows", "3000", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sites"] and report["target"] == "h100-sxm" and report["batch"] == 4096
    for site in report["sites"]:
        assert site["precision"] in ("bf16", "fp8") and site["error_row"] >= 0
        assert not (site["precision"] == "fp8" and not site["safe"])
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    run = client.get_run(report["mlflow_run_id"])
    assert run.data.tags["kind"] == "fp8_probe"
    assert {"probe.json", "probe.csv"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    assert run.data.metrics["latency_dispatch_us"] == pytest.approx(report["latency_dispatch_us"])
    # Bad input: exit 2, one paragraph, nothing logged.
    for flags, words in (
        (["--target", "cpu"], "--target: must be one of h100-sxm, h200"),
        (["--threshold", "2"], "--threshold: must be in [0, 1)"),
        (["--weights", str(tmp_path / "none.pt")], "--weights: no file at"),
        (["--batch", "9" * 20], "--batch: must be an integer from 1 to 1,048,576"),  # was priced
    ):
        bad = nas_here(runs, "fp8", "probe", "examples/specs/dcnv2.json", *flags)
        assert bad.returncode == 2 and words in " ".join(bad.stderr.split()), bad.stderr
        assert "Traceback" not in bad.stderr
    # An MLflow store it cannot log to is named before the training, not after it.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "mlflow.db").write_text("not a database")
    bad = nas(broken, "fp8", "probe", "examples/specs/dcnv2.json", "--dataset", "movielens-100k")
    message = " ".join(bad.stderr.split())
    assert bad.returncode == 2 and "mlflow.db is not a sqlite database" in message, bad.stderr
    assert "Training" not in bad.stdout + bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("spec_file", ["dcnv2.json", "modern/rocs.json"])
def test_serving_latency_in_fp8_dispatch_prices_each_site_at_the_requests_sizes(
    ml100k, spec_file: str
) -> None:
    """The probe records each site's rows in a request of C candidates (request side once,
    candidate side per candidate); ``serving_latency`` in fp8-dispatch is the BF16 request
    estimate less what FP8 saves at the safe sites, priced at those rows."""
    from nas.arch.cost import request_estimate
    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from nas.search.objectives import cost_values, serving_fp8_saving
    from nas.service.config import validate_config
    from workers.fp8_probe import serving_rows

    spec = ArchSpec.load(f"examples/specs/{spec_file}")
    model = build_model(spec, ml100k.schema).eval()
    rows = serving_rows(model, ml100k.features("valid")[torch.arange(8)].inputs())
    assert rows["top.layers.2"] == (0, 1)  # after the request's share: per candidate
    if spec_file == "modern/rocs.json":  # the request features' share of the top, once
        assert rows["top.layers.0[:, 0:128]"] == (1, 0)
        assert rows["tokens.history.layers.0.f1"][1] == 0  # the history, once per request
    h200 = get_target("h200")
    sites = [
        {"name": n, "safe": True, "in_features": 4096, "out_features": 4096}
        | {"request_rows": a, "candidate_rows": b}
        for n, (a, b) in rows.items()
    ]
    few, many = serving_fp8_saving(sites, h200, 10), serving_fp8_saving(sites, h200, 10_000)
    assert 0 <= few <= many and many > 0
    assert serving_fp8_saving([s | {"safe": False} for s in sites], h200, 10_000) == 0
    objective = {"name": "serving_latency", "target": "h200", "precision": "fp8-dispatch"}
    config = validate_config(
        {"name": "c", "space": {"name": "ctr_stack"}, "objectives": ["ne", objective]}
    )
    priced = cost_values(config.objectives, spec, ml100k.schema, metrics={"fp8": {"sites": sites}})
    bf16 = request_estimate(spec, ml100k.schema, h200, "bf16", 100).seconds
    saved = serving_fp8_saving(sites, h200, 100)
    assert priced["serving_latency"] == pytest.approx((bf16 - saved) * 1e6)
    unprobed = cost_values(config.objectives, spec, ml100k.schema)
    assert unprobed["serving_latency"] == pytest.approx(bf16 * 1e6)
