"""Criteo-format TSV: the reader, its errors, train-only vocabularies; the synthetic generator."""

from __future__ import annotations

import numpy as np
import pytest

from nas.core.errors import ConfigError, DataError
from nas.data import PrepareRequest, prepare_dataset
from nas.data.criteo import NUM_CATEGORICAL, NUM_DENSE, write_synthetic_criteo


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


def _prepared(tmp_path, lines, min_count=None):
    """``lines`` prepared as Criteo, their labels 0, 1, 0, ... (a label needs both values in
    train)."""
    path = tmp_path / "c.tsv"
    path.write_text("".join(f"{i % 2}{line[1:]}" for i, line in enumerate(lines)))
    request = PrepareRequest(source=str(path), min_count=min_count)
    return prepare_dataset("criteo", tmp_path / "cache", request)[0]


def test_vocabulary_comes_from_train_rows_only(tmp_path):
    lines = [_line(cats=["seen"] * NUM_CATEGORICAL) for _ in range(8)]
    lines += [_line(cats=["late"] * NUM_CATEGORICAL) for _ in range(2)]  # valid + test only
    ds = _prepared(tmp_path, lines)
    categorical = np.asarray(ds.array("categorical"))
    assert (categorical[:8] == 2).all()  # the first id of a vocabulary
    assert (categorical[8:] == 1).all(), "a value first seen after train got its own id"
    assert ds.schema.of_kind("categorical")[0].cardinality == 3  # padding, unknown, "seen"


def test_min_count_drops_rare_values_and_empty_is_missing(tmp_path):
    lines = [_line(cats=["rare"] + [""] * (NUM_CATEGORICAL - 1))]  # once, in train
    lines += [_line(cats=["common"] * NUM_CATEGORICAL) for _ in range(9)]
    ds = _prepared(tmp_path, lines, min_count=2)
    categorical = np.asarray(ds.array("categorical")[ds.split_rows("train")])
    assert categorical[0, 0] == 1 and categorical[0, 1] == 0 and categorical[1, 0] == 2


def test_dense_transform(tmp_path):
    lines = [_line(dense=["3", "", "-2"] + ["0"] * (NUM_DENSE - 3))] + [_line()] * 9
    ds = _prepared(tmp_path, lines)  # ten rows: each split has one or more
    np.testing.assert_allclose(ds.array("dense")[0, :3], [np.log(4), 0, 0], rtol=1e-6)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("1\t2\n", "Expected 40 columns, got 2"),
        (_line(label="yes"), "column 'label'"),
        (_line(dense=["x"] + [""] * (NUM_DENSE - 1)), "column 'I1'"),
    ],
)
def test_malformed_lines_name_file_row_and_column(tmp_path, bad, words):
    path = tmp_path / "c.tsv"
    path.write_text(_line() * 3 + bad)
    with pytest.raises(DataError) as err:
        prepare_dataset("criteo", tmp_path / "cache", PrepareRequest(source=str(path)))
    assert words in str(err.value) and "c.tsv" in str(err.value)
    assert not (tmp_path / "cache" / "criteo").exists()


def test_criteo_reads_a_gzipped_file_as_the_plain_one(tmp_path):
    import gzip

    write_synthetic_criteo(tmp_path / "s.tsv", rows=500, seed=2)
    (tmp_path / "s.tsv.gz").write_bytes(gzip.compress((tmp_path / "s.tsv").read_bytes()))
    plain, _ = prepare_dataset(
        "criteo", tmp_path / "a", PrepareRequest(source=str(tmp_path / "s.tsv"))
    )
    packed, _ = prepare_dataset(
        "criteo", tmp_path / "b", PrepareRequest(source=str(tmp_path / "s.tsv.gz"))
    )
    for name in ("categorical", "dense", "label", "split"):
        assert (np.asarray(plain.array(name)) == np.asarray(packed.array(name))).all()


def test_criteo_needs_a_source_that_is_a_file(tmp_path):
    with pytest.raises(ConfigError, match="needs --source"):
        prepare_dataset("criteo", tmp_path)
    with pytest.raises(ConfigError, match="no Criteo-format file at"):
        prepare_dataset("criteo", tmp_path, PrepareRequest(source=str(tmp_path / "nope.tsv")))
