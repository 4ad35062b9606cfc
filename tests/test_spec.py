"""ArchSpec: JSON round-trip, a stable arch_id, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError, NasError

SPECS = sorted((Path(__file__).parent.parent / "examples" / "specs").glob("*.json"))
BASE = {"embedding_dim": 8, "interaction": [{"block": "dcnv2", "rank": 4}], "top_mlp": [16]}


def test_the_baselines_are_there():
    assert {p.stem for p in SPECS} >= {"dlrm", "dcnv2", "autoint", "deepfm"}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_round_trip(path):
    spec = ArchSpec.load(path)
    again = ArchSpec.from_json(spec.to_json())
    assert again == spec
    assert again.arch_id == spec.arch_id
    assert hash(again) == hash(spec)  # frozen values: usable as keys


def test_arch_id_ignores_key_order_defaults_and_name():
    explicit = {
        "name": "mine",
        "top_mlp": [16],
        "interaction": [{"rank": 4, "num_layers": 2, "block": "dcnv2"}],
        "embedding_dim": 8,
        "top_input": "last",
        "bottom_mlp": [],
    }
    assert ArchSpec.from_dict(explicit).arch_id == ArchSpec.from_dict(BASE).arch_id


def test_arch_id_changes_with_the_architecture():
    other = {**BASE, "interaction": [{"block": "dcnv2", "rank": 5}]}
    assert ArchSpec.from_dict(other).arch_id != ArchSpec.from_dict(BASE).arch_id


def test_arch_id_is_pinned_by_canonical_json():
    spec = ArchSpec.from_dict(BASE)
    assert spec.canonical_json() == (
        '{"bottom_mlp":[],"embedding_dim":8,"interaction":[{"block":"dcnv2","num_layers":2,'
        '"rank":4}],"top_input":"last","top_mlp":[16]}'
    )


def test_spec_is_frozen():
    spec = ArchSpec.from_dict(BASE)
    with pytest.raises(AttributeError):
        spec.embedding_dim = 4


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"interaction": [{"block": "dcn"}]}, "interaction[0].block", "dcnv2"),
        (
            {"interaction": [{"block": "embedding"}]},
            "interaction[0].block",
            "Valid interaction blocks",
        ),
        ({"interaction": [{"block": "dcnv2", "rnk": 4}]}, "interaction[0].rnk", "num_layers, rank"),
        ({"interaction": [{"block": "dcnv2", "rank": {"a": 1}}]}, "interaction[0].rank", "number"),
        ({"interaction": ["dcnv2"]}, "interaction[0]", '"block"'),
        ({"interaction": {"block": "fm"}}, "interaction", "list"),
        ({"top_mlp": [16, 0]}, "top_mlp[1]", "must be in [1, 65536]"),
        ({"top_mlp": "16"}, "top_mlp", "list"),
        ({"embedding_dim": 0}, "embedding_dim", "must be in [1, 65536]"),
        ({"embedding_dim": 8.0}, "embedding_dim", "integer"),
        ({"top_input": "first"}, "top_input", "last, all"),
        ({"widths": [1]}, "widths", "valid fields"),
        ({"name": 3}, "name", "string"),
    ],
)
def test_load_errors_name_the_field(change, field, words):
    with pytest.raises(ConfigError) as err:
        ArchSpec.from_dict({**BASE, **change}, source="s.json")
    assert err.value.field == field
    assert words in str(err.value)
    assert str(err.value).startswith("s.json: ")


def test_missing_field():
    with pytest.raises(ConfigError, match="top_mlp: is required"):
        ArchSpec.from_dict({"embedding_dim": 8, "interaction": []})


@pytest.mark.parametrize(
    ("interaction", "field"),
    [
        ([{"block": "dcnv2", "rank": -1}], "interaction[0].rank"),
        ([{"block": "mlp", "widths": [8]}, {"block": "fm"}], "interaction[1].num_tokens"),
        (
            [{"block": "dot"}, {"block": "self_attention", "num_heads": 4}],
            "interaction[1].num_heads",
        ),
    ],
)
def test_shape_errors_surface_when_layers_resolve(interaction, field):
    spec = ArchSpec.from_dict({**BASE, "interaction": interaction})
    with pytest.raises(ConfigError) as err:
        spec.layer_configs(input_tokens=3)
    assert err.value.field == field


def test_layer_shapes_chain():
    spec = ArchSpec.from_dict(
        {**BASE, "interaction": [{"block": "dot"}, {"block": "mlp", "widths": [6]}]}
    )
    dot, mlp = spec.layer_configs(input_tokens=4)
    assert (dot.out_shape().num_tokens, dot.out_shape().dim) == (1, 6)
    assert (mlp.num_tokens, mlp.dim) == (1, 6)


def test_bad_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"embedding_dim": 8,')
    with pytest.raises(ConfigError, match="bad.json: not valid JSON"):
        ArchSpec.load(bad)
    with pytest.raises(NasError, match="cannot read"):
        ArchSpec.load(tmp_path / "missing.json")


def test_to_dict_is_plain_json():
    spec = ArchSpec.load(SPECS[0])
    assert json.loads(json.dumps(spec.to_dict())) == spec.to_dict()
