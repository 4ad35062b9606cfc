"""Criteo-format TSV: the reader, its errors, train-only vocabularies; the synthetic generator."""

from __future__ import annotations

import numpy as np
import pytest

from nas.core.errors import ConfigError, DataError
from nas.data import PrepareRequest, prepare_dataset
from nas.data.criteo import NUM_CATEGORICAL, NUM_DENSE, from_tsv, write_synthetic_criteo


def _line(label="0", dense=None, cats=None) -> str:
    dense = dense if dense is not None else [""] * NUM_DENSE
    cats = cats if cats is not None else ["a1b2"] * NUM_CATEGORICAL
    return "\t".join([label, *dense, *cats]) + "\n"


def test_synthetic_is_seeded(tmp_path):
    write_synthetic_criteo(tmp_path / "a.tsv", rows=300, seed=3)
    write_synthetic_criteo(tmp_path / "b.tsv", rows=300, seed=3)
    write_synthetic_criteo(tmp_path / "c.tsv", rows=300, seed=4)
    a, b, c = ((tmp_path / f"{n}.tsv").read_text() for n in "abc")
    assert a == b and a != c
    assert len(a.splitlines()) == 300


def test_synthetic_prepares_with_the_criteo_schema(tmp_path):
    ds, _ = prepare_dataset("synthetic-criteo", tmp_path, PrepareRequest(rows=2000, seed=1))
    schema = ds.schema
    assert len(schema.of_kind("categorical")) == NUM_CATEGORICAL
    assert len(schema.of_kind("dense")) == NUM_DENSE
    assert schema.num_tokens == NUM_CATEGORICAL + 1
    assert ds.manifest["split_sizes"] == {"train": 1600, "valid": 200, "test": 200}
    train = ds.features("train")
    assert train.dense.shape == (1600, NUM_DENSE) and (train.dense >= 0).all()
    assert 0.05 < ds.positive_rate() < 0.95


def test_vocabulary_comes_from_train_rows_only(tmp_path):
    lines = [_line(cats=["seen"] * NUM_CATEGORICAL) for _ in range(8)]
    lines += [_line(cats=["late"] * NUM_CATEGORICAL) for _ in range(2)]  # valid + test only
    path = tmp_path / "c.tsv"
    path.write_text("".join(lines))
    arrays, manifest = from_tsv("criteo", path)
    assert (arrays["categorical"][:8] == 1).all()
    assert (arrays["categorical"][8:] == 0).all(), "a value first seen after train got an id"
    assert manifest["schema"][0]["cardinality"] == 2


def test_min_count_drops_rare_values(tmp_path):
    lines = [_line(cats=["common"] * NUM_CATEGORICAL) for _ in range(9)] + [
        _line(cats=["rare"] * 26)
    ]
    path = tmp_path / "c.tsv"
    path.write_text("".join(lines[::-1]))
    arrays, _ = from_tsv("criteo", path, min_count=2)
    assert arrays["categorical"][0, 0] == 0 and arrays["categorical"][1, 0] == 1


def test_dense_transform(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text(_line(dense=["3", "", "-2"] + ["0"] * (NUM_DENSE - 3)))
    arrays, _ = from_tsv("criteo", path)
    np.testing.assert_allclose(arrays["dense"][0, :3], [np.log(4), 0, 0], rtol=1e-6)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("1\t2\n", "expected 40"),
        (_line(label="yes"), "label must be 0 or 1"),
        (_line(dense=["x"] + [""] * (NUM_DENSE - 1)), "dense values must be numbers, got 'x'"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, bad, words):
    path = tmp_path / "c.tsv"
    path.write_text(_line() + bad)
    with pytest.raises(DataError) as err:
        prepare_dataset("criteo", tmp_path / "cache", PrepareRequest(source=str(path)))
    assert err.value.line == 2 and words in str(err.value) and "c.tsv" in str(err.value)
    assert not (tmp_path / "cache" / "criteo").exists()


def test_criteo_needs_a_source(tmp_path):
    with pytest.raises(ConfigError, match="needs --source"):
        prepare_dataset("criteo", tmp_path)
