"""The model builder on real schemas, and the model's analytic FLOPs against fvcore's count."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nas.arch.flops import measure_flops, measure_flops_per_example
from nas.arch.model import build_model, model_configs
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError
from nas.data.schema import Schema

SPECS = sorted((Path(__file__).parent.parent / "examples" / "specs").glob("*.json"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
@pytest.mark.parametrize("data", ["ml100k", "criteo_like"])
def test_baselines_build_run_and_count(path, data, request):
    dataset = request.getfixturevalue(data)
    torch.manual_seed(0)
    spec = ArchSpec.load(path)
    model = build_model(spec, dataset.schema)
    batch = dataset.features("valid")[:6]
    logits = model(*batch.inputs())
    assert logits.shape == (6,) and torch.isfinite(logits).all()
    assert model.flops() == measure_flops_per_example(model, batch.inputs())


def test_top_input_all_feeds_every_stage(ml100k):
    last = ArchSpec.load(SPECS[0]).to_dict() | {
        "interaction": [{"block": "fm"}],
        "top_input": "last",
    }
    configs = model_configs(ArchSpec.from_dict(last), ml100k.schema)
    assert configs["top"].dim == 16  # the FM's one token
    configs = model_configs(ArchSpec.from_dict(last | {"top_input": "all"}), ml100k.schema)
    assert configs["top"].dim == 16 + ml100k.schema.num_tokens * 16


def test_dense_features_become_a_token(criteo_like):
    spec = ArchSpec.from_dict(
        {"embedding_dim": 8, "interaction": [], "top_mlp": [], "bottom_mlp": [32]}
    )
    configs = model_configs(spec, criteo_like.schema)
    assert configs["bottom"].widths == (32, 8) and configs["bottom"].dim == 13
    assert configs["top"].dim == 27 * 8


def test_a_dataset_without_ids_is_refused_saying_what_to_declare(criteo_like):
    only_dense = Schema(tuple(f for f in criteo_like.schema.fields if f.kind != "categorical"))
    spec = ArchSpec.from_dict({"embedding_dim": 8, "interaction": [], "top_mlp": []})
    with pytest.raises(ConfigError, match="needs at least one.*type categorical") as err:
        build_model(spec, only_dense)
    assert err.value.field == "dataset"


def test_shape_errors_name_the_layer(ml100k):
    spec = ArchSpec.from_dict(
        {"embedding_dim": 8, "interaction": [{"block": "mlp"}, {"block": "dot"}], "top_mlp": []}
    )
    with pytest.raises(ConfigError, match=r"interaction\[1\].num_tokens"):
        build_model(spec, ml100k.schema)


def test_uncountable_ops_are_refused():
    class Cumulative(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=1)

    with pytest.raises(RuntimeError, match="cumsum"):
        measure_flops(Cumulative(), (torch.randn(2, 3),))


@pytest.mark.parametrize("name", ["dlrm", "deepfm", "modern/rocs"])
def test_training_runs_the_top_layer_as_one_gemm_to_the_same_logits(ml100k, name):
    """In training the top MLP's first layer is one GEMM over both sides' features; in
    scoring, the request share is its own GEMM (request-oriented serving): same sums."""
    torch.manual_seed(0)
    model = build_model(ArchSpec.load(f"examples/specs/{name}.json"), ml100k.schema)
    assert model.top_request_features > 0  # the split exists for this spec
    batch = ml100k.features("valid")[:64]
    batch = batch if model.reads_history else batch.without_history()
    split = model.eval()(*batch.inputs())
    merged = model.train()(*batch.inputs())
    torch.testing.assert_close(merged, split, rtol=1e-5, atol=1e-5)
