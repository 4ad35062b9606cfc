"""A whole GLM/DCA model with a history encoder on MovieLens: request-side outputs of every
layer ignore the candidate, request-oriented scoring equals per-candidate scoring, and the
analytic cost (whole and by side) matches what runs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from nas.arch.flops import measure_flops_per_example
from nas.arch.model import CandidateInputs, build_model
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from workers.train import TrainConfig, evaluate, train

MODERN = Path(__file__).parent.parent / "examples" / "specs" / "modern"

STACKED = {
    "embedding_dim": 8,
    "sequence": {"max_len": 16, "layers": [{"block": "hstu", "qk_dim": 4, "value_dim": 4}]},
    "interaction": [
        {"block": "glm_wukong", "num_fm_tokens": 4, "num_lc_tokens": 4, "rank": 4, "widths": [16]},
        {"block": "dca", "num_heads": 2},
        {"block": "glm_dhen", "modules": ["dot", "self_attention", "conv", "dcn", "linear"]},
        {"block": "glm_linear", "out_tokens": 6},
        {"block": "glm_mlp", "widths": [16, 12]},  # tokens wider than the history (8)
        {"block": "dhen", "modules": ["linear", "dcn"]},  # no GLM: the rest is candidate-side
        {"block": "glm_linear"},
        {"block": "dca"},
    ],
    "top_mlp": [16],
    "top_input": "all",
}


@pytest.fixture(scope="module")
def model(ml100k):
    torch.manual_seed(0)
    return build_model(ArchSpec.from_dict(STACKED), ml100k.schema).eval()


@pytest.fixture(scope="module")
def batch(ml100k):
    return ml100k.features("valid")[torch.arange(0, 4000, 400)]  # 10 rows, 10 users


def _other_candidates(model, inputs, seed: int = 1):
    """The same requests, every candidate-side input replaced by another row's."""
    request, candidates = model.split_inputs(*inputs)
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(candidates.categorical), generator=g)
    return request, CandidateInputs(
        candidates.categorical[order], candidates.multi_hot[order], candidates.dense[order]
    )


def test_request_side_of_every_layer_ignores_the_candidate(model, batch):
    request, candidates = model.split_inputs(*batch.inputs())
    base = model.stages(request, candidates, None)
    moved = model.stages(*_other_candidates(model, batch.inputs()), None)
    sides = [s.num_request for s in base]
    assert sides == [9, 4, 4, 4, 3, 1, 0, 0, 0]  # 8 fields + the history; then as configured
    for i, (a, b) in enumerate(zip(base, moved, strict=True)):
        torch.testing.assert_close(a.request, b.request, rtol=0, atol=0, msg=f"stage {i}")
        assert not torch.allclose(a.candidate, b.candidate), f"stage {i}"


@pytest.mark.parametrize("spec", [STACKED, "rocs.json", "hstu_seq.json", "wukong.json"])
def test_request_oriented_scoring_equals_per_candidate(spec, ml100k, batch):
    torch.manual_seed(0)
    data = spec if isinstance(spec, dict) else ArchSpec.load(MODERN / spec).to_dict()
    model = build_model(ArchSpec.from_dict(data), ml100k.schema).eval()
    request, _ = model.split_inputs(*batch.inputs())
    # 3 requests; 7, 1 and 12 candidates drawn from other rows.
    owner = torch.tensor([0] * 7 + [1] + [2] * 12)
    pool = ml100k.features("train")[torch.randperm(5000)[:20]]
    _, candidates = model.split_inputs(*pool.inputs())
    picked = torch.tensor([0, 4, 9])
    request = type(request)(
        request.categorical[picked], request.multi_hot[picked], request.history[picked]
    )
    with torch.no_grad():
        shared = model.score_requests(request, candidates, owner)
        repeated = type(request)(
            request.categorical[owner], request.multi_hot[owner], request.history[owner]
        )
        per_candidate = model.score_requests(repeated, candidates, None)
    torch.testing.assert_close(shared, per_candidate, rtol=1e-5, atol=1e-5)


def test_the_history_encoder_times_events_from_the_request(model, batch):
    """The last event is queried at the request's time, so the same history seen a while
    later (every age larger by the same amount) encodes differently."""
    request, _ = model.split_inputs(*batch.inputs())
    encoder = copy.deepcopy(model.history)
    with torch.no_grad():
        for layer in encoder.layers:
            layer.time_bias.normal_()  # zero at initialisation
        later = request.history.clone()
        later[..., 2] += (later[..., 0] > 0) * 30 * 86_400
        now, _ = encoder(request.history)
        then, _ = encoder(later)
    assert not torch.allclose(now, then)


def test_glm_model_cost_matches_fvcore_and_splits_by_side(model, batch):
    inputs = batch.inputs()
    assert model.flops() == measure_flops_per_example(model, inputs)
    request, candidate = model.flops_by_side()
    assert request + candidate == model.flops() and request > 0 and candidate > 0
    assert model.flops_per_request(100) == request + 100 * candidate


def test_the_model_learns(ml100k):
    torch.manual_seed(0)
    fresh = build_model(ArchSpec.from_dict(STACKED), ml100k.schema)
    train(fresh, ml100k.features("train"), TrainConfig(steps=150, batch_size=256))
    valid = ml100k.features("valid")[:4000]
    metrics = evaluate(fresh, valid, ml100k.positive_rate("train"), batch_size=1000)
    assert metrics["auc"] > 0.68, metrics


def test_sequence_section_errors_name_the_field(ml100k, criteo_like):
    bad = {**STACKED, "sequence": {**STACKED["sequence"], "max_len": 500}}
    with pytest.raises(ConfigError, match=r"sequence.max_len.*at most 64"):
        build_model(ArchSpec.from_dict(bad), ml100k.schema)
    with pytest.raises(ConfigError, match="sequence.pooling"):
        ArchSpec.from_dict({**STACKED, "sequence": {**STACKED["sequence"], "pooling": "max"}})
    with pytest.raises(ConfigError, match="sequence.layers\\[0\\].block"):
        ArchSpec.from_dict({**STACKED, "sequence": {"max_len": 8, "layers": [{"block": "mlp"}]}})
    no_history = {k: v for k, v in STACKED.items() if k != "sequence"}
    with pytest.raises(ConfigError, match="interaction\\[1\\].*sequence"):
        build_model(ArchSpec.from_dict(no_history), ml100k.schema)
    with pytest.raises(ConfigError, match="no history"):
        build_model(ArchSpec.from_dict(STACKED), criteo_like.schema)


@pytest.mark.parametrize("fmt", ["torch-export", "torchscript"])
def test_exported_request_and_candidate_programs_compose_to_per_candidate_scoring(
    model, batch, fmt, tmp_path
):
    import warnings

    from nas.arch.model import RequestInputs
    from nas.service.model_export import export_split

    written = export_split(model, batch.inputs(), fmt, tmp_path)
    assert written["request_split_max_abs_difference"] <= 1e-5
    suffix = ".pt2" if fmt == "torch-export" else ".pt"
    with warnings.catch_warnings():  # torch.jit.load is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        request_side, candidate_side = (
            torch.export.load(tmp_path / f"{part}{suffix}").module()
            if fmt == "torch-export"
            else torch.jit.load(str(tmp_path / f"{part}{suffix}"))
            for part in ("request", "candidate")
        )
    # Other sizes than the export's: 3 requests, 7 candidates.
    request, candidates = model.split_inputs(*batch.inputs())
    owner = torch.tensor([2, 0, 1, 1, 0, 2, 2])
    rows = torch.arange(3, 10)
    with torch.no_grad():
        state = request_side(request.categorical[:3], request.multi_hot[:3], request.history[:3])
        cand = (candidates.categorical[rows], candidates.multi_hot[rows], candidates.dense[rows])
        served = candidate_side(state[0], *cand, owner, *state[1:])
        repeated = RequestInputs(
            request.categorical[owner], request.multi_hot[owner], request.history[owner]
        )
        expected = model.score_requests(repeated, CandidateInputs(*cand), None)
    torch.testing.assert_close(served, expected, atol=1e-5, rtol=1e-5)
