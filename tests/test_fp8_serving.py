"""A registered model from a search priced in ``fp8-dispatch`` serves its plan: its FP8
sites run as row-wise FP8 GEMMs in ``nas predict`` (the pyfunc) and in ``nas export``'s
programs, the rest as trained."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from kernels.fp8_linear import Fp8Dispatch, LinearSites
from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.service.model_export import export_loaded
from nas.service.registry import Trial
from nas.service.retrain import _Picked
from nas.service.serving import LoadedModel
from tests.test_search import REPO
from workers.fp8_probe import fp8_plan_sites


class _Names(LinearSites):
    def __init__(self, model):
        super().__init__(model)
        self.seen: list[str] = []

    def at_site(self, name, x, weight, bias):
        self.seen.append(name)
        return super().at_site(name, x, weight, bias)


def _loaded(dataset, tmp_path: Path, spec_file: str, sites: list[str] | None):
    torch.manual_seed(0)
    spec = ArchSpec.load(REPO / "examples" / "specs" / spec_file)
    model = build_model(spec, dataset.schema)
    info = {
        "spec": spec.to_dict(),
        "schema": dataset.schema.to_list(),
        "raw_form": dataset.raw_form().to_dict(),
    }
    if sites is not None:
        info |= {"precision": "fp8-dispatch", "fp8_sites": sites}
    (tmp_path / "model.json").write_text(json.dumps(info))
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    return LoadedModel.from_files(tmp_path / "model.json", tmp_path / "weights.pt")


def _sites(loaded, rows) -> list[str]:
    names = _Names(loaded.model)
    with torch.no_grad(), names:
        loaded.model(*loaded.features(rows).inputs())
    return sorted(set(names.seen))


def test_a_plans_sites_serve_in_fp8_and_the_rest_as_trained(ml100k, tmp_path: Path) -> None:
    rows = ml100k.raw_rows("test", 64)
    plain = _loaded(ml100k, tmp_path, "dcnv2.json", None)
    sites = _sites(plain, rows)
    assert len(sites) >= 3  # cross layers, MLP layers, the top
    half = sites[::2]
    served = _loaded(ml100k, tmp_path, "dcnv2.json", half)
    got = served.probabilities(rows)["probability"]
    want = plain.probabilities(rows)["probability"]
    assert 0 < abs(got - want).max() < 0.05, "FP8 GEMMs move the scores a little, not a lot"
    with torch.no_grad(), Fp8Dispatch(plain.model, half):  # exactly the plan, run by hand
        logits = plain.model(*plain.features(rows).inputs())
    assert torch.allclose(torch.sigmoid(logits), torch.from_numpy(got), atol=1e-6)


def test_the_plans_fp8_sites_are_read_from_a_trials_probe() -> None:
    plan = {
        "sites": [
            {"name": "cross.0", "precision": "fp8"},
            {"name": "top.0", "precision": "bf16"},
            {"name": "top.1", "precision": "fp8"},
        ]
    }
    assert fp8_plan_sites({"ne": 0.8, "fp8": plan}) == ["cross.0", "top.1"]
    assert fp8_plan_sites({"ne": 0.8}) is None and fp8_plan_sites(None) is None
    # a retrain's pick carries them: with train.precision fp8 it trains those sites in FP8
    probed = Trial(number=3, arch_id="a" * 16, spec={}, metrics={"ne": 0.8, "fp8": plan})
    assert _Picked(probed, "best").pick().fp8_sites == ["cross.0", "top.1"]
    assert _Picked(Trial(number=4, arch_id="b" * 16, spec={}), "best").pick().fp8_sites is None


def test_the_exported_programs_carry_the_fp8_gemms(ml100k, tmp_path: Path) -> None:
    """The per-candidate program and the request/candidate pair (HSTU reads the history
    on the request side), each checked against the eager model served in FP8."""
    rows = ml100k.raw_rows("test", 16)
    (tmp_path / "a").mkdir()
    plain = _loaded(ml100k, tmp_path / "a", "modern/hstu_seq.json", None)
    sites = _sites(plain, rows)
    served = _loaded(ml100k, tmp_path, "modern/hstu_seq.json", sites)
    example = served.features(rows).inputs()
    written = export_loaded(served, example, "torch-export", tmp_path / "out", "test")
    assert written["precision"].startswith(f"fp8-dispatch: {len(sites)} GEMM sites")
    assert written["max_abs_difference_from_eager"] <= 1e-5
    assert written["request_split_max_abs_difference"] <= 1e-5
    for name in ("model.pt2", "candidate.pt2"):
        program = torch.export.load(tmp_path / "out" / name)
        targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
        assert any("_scaled_mm" in t for t in targets), name
    exported = json.loads((tmp_path / "out" / "export.json").read_text())
    assert exported["precision"] == written["precision"]
