"""The raw form: serving rows -> the same ids ``prepare`` gave, unknowns to 0, bad rows named."""

from __future__ import annotations

import copy
import datetime
import json
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nas.data.labels import LabelRule, RawLabels, raw_labels
from nas.data.raw import RawInputError


def raw_rows(dataset, split: str, count: int):
    """The split's first rows as features, and in the raw form."""
    return dataset.features(split)[:count], dataset.raw_rows(split, count)


@pytest.mark.parametrize("split", ["train", "test"])
def test_movielens_rows_in_raw_form_encode_to_the_prepared_ids(ml100k, split) -> None:
    features, rows = raw_rows(ml100k, split, 400)
    assert {"user_id", "item_id", "timestamp", "genres", "history"} <= set(rows[0])
    again = ml100k.raw_form().features(json.loads(json.dumps(rows)), ml100k.schema)
    assert torch.equal(again.categorical, features.categorical)
    assert torch.equal(again.multi_hot, features.multi_hot)
    assert torch.equal(again.history.tensor(), features.history.tensor())


def test_criteo_rows_in_raw_form_encode_to_the_prepared_features(criteo_like) -> None:
    features, rows = raw_rows(criteo_like, "valid", 30)
    again = criteo_like.raw_form().features(rows, criteo_like.schema)
    assert torch.equal(again.categorical, features.categorical)
    assert torch.allclose(again.dense, features.dense, atol=1e-5)
    empty = criteo_like.raw_form().features([{}], criteo_like.schema)  # every column optional
    assert empty.categorical.sum() == 0 and empty.dense.abs().sum() == 0


def test_a_dense_value_the_model_cannot_read_is_refused(criteo_like) -> None:
    """Read as it is (transform none), 1e300 is beyond the float32 the model reads: the
    model would score the row NaN."""
    form = copy.deepcopy(criteo_like.raw_form())
    form.dense[0] = recipe = dict(form.dense[0], transform="none")
    _, rows = raw_rows(criteo_like, "valid", 2)
    with pytest.raises(RawInputError) as caught:
        form.features([rows[0], dict(rows[1], **{recipe["column"]: 1e300})], criteo_like.schema)
    assert (caught.value.row, caught.value.column) == (2, recipe["column"])
    assert "is 1e+300: as the model reads it (none) beyond float32's range" in str(caught.value)


def test_a_row_with_none_of_the_model_columns_is_refused(ml100k) -> None:
    """A wrapper object or a header spelled otherwise would score as a row of unknowns."""
    _, rows = raw_rows(ml100k, "test", 1)
    with pytest.raises(RawInputError, match=r"row 2: .*has none of the columns the model "):
        ml100k.raw_form().features([rows[0], {"User_Id": 1, "rows": []}], ml100k.schema)


def test_unknown_values_map_to_the_unknown_id(ml100k) -> None:
    _, rows = raw_rows(ml100k, "test", 2)
    form = ml100k.raw_form()
    row = dict(rows[0], item_id="no such film", gender="?", genres="Nothing|Drama")
    row["history"] = [["no such film", 9, 1], rows[0]["history"][-1]]
    missing = {k: v for k, v in row.items() if k != "occupation"}
    encoded = form.features([row, missing], ml100k.schema)
    names = [f.name for f in ml100k.schema.of_kind("categorical")]
    oov = ml100k.manifest["ids"]["oov"]
    assert encoded.categorical[0, names.index("item")] == oov
    assert encoded.categorical[0, names.index("gender")] == oov
    assert encoded.categorical[0, names.index("user")] > oov
    assert encoded.categorical[1, names.index("occupation")] == 0  # missing: id 0
    drama = form.multi_hot[0]["vocab"]["Drama"]
    assert encoded.multi_hot[0, 0, :2].tolist() == [oov, drama]
    history = encoded.history.tensor()[0]
    assert history[0, :2].tolist() == [oov, 0]  # unknown item, an action out of range
    assert history[1, 0] > oov


@pytest.mark.parametrize(
    ("change", "row", "column", "words"),
    [
        ({"timestamp": None}, 2, "timestamp", "is missing"),
        ({"timestamp": "yesterday"}, 2, "timestamp", "must be a unix time in seconds or a d"),
        ({"timestamp": float("inf")}, 2, "timestamp", "must be a unix time in seconds"),
        ({"timestamp": True}, 2, "timestamp", "must be a unix time in seconds"),
        ({"timestamp": [5]}, 2, "timestamp", "must be a unix time in seconds"),
        ({"user_id": {"id": 1}}, 2, "user_id", "must be a string"),
        ({"genres": [1.5, 2]}, 2, "genres", "list of ids (texts or integers)"),
        ({"genres": [True]}, 2, "genres", "list of ids (texts or integers)"),
        ({"history": "not json"}, 2, "history", "triples"),
        ({"history": [{"item": "1", "action": 1}]}, 2, "history", "objects"),
        ({"history": [{"item": "1", "action": "x", "time": 1}]}, 2, "history[action]", "integer"),
        ({"history": [["1", "five", 3]]}, 2, "history[action]", "must be an integer"),
        ({"timestamp": 2**63}, 2, "timestamp", "must be a time in 64 bits"),
        ({"timestamp": 9.3e18}, 2, "timestamp", "must be a time in 64 bits"),
        ({"history": [["1", 1, -(2**64)]]}, 2, "history[time]", "must be a time in 64 bits"),
        ({"history": [["1", 1, "soon"]]}, 2, "history[time]", "must be a unix time in seconds"),
    ],
)
def test_a_bad_row_is_named_with_its_column(ml100k, change, row, column, words) -> None:
    _, rows = raw_rows(ml100k, "test", 2)
    bad = {k: v for k, v in {**rows[1], **change}.items() if v is not None}
    with pytest.raises(RawInputError) as caught:
        ml100k.raw_form().features([rows[0], bad], ml100k.schema)
    assert (caught.value.row, caught.value.column) == (row, column)
    assert words in str(caught.value) and f"row {row}" in str(caught.value)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["user_id", "item_id", "gender", "timestamp", "genres", "history", "x"]),
        st.one_of(
            st.none(),
            st.integers(-(2**70), 2**70),
            st.floats(allow_nan=True),
            st.text(max_size=8),
            st.lists(st.text(max_size=3), max_size=3),
        ),
    )
)
def test_any_row_encodes_or_raises_a_named_error(ml100k, change) -> None:
    _, rows = raw_rows(ml100k, "test", 1)
    form = ml100k.raw_form()
    try:
        encoded = form.features([{**rows[0], **change}], ml100k.schema)
    except RawInputError as err:
        assert err.row == 1 and err.column.split("[")[0] in form.columns
        return
    for j, field in enumerate(ml100k.schema.of_kind("categorical")):
        assert 0 <= int(encoded.categorical[0, j]) < field.cardinality
    assert np.isfinite(encoded.dense.numpy()).all()


CLICK = LabelRule("click", "click")
LIKE = LabelRule("like", "rating", at_least=4)
PURCHASE = LabelRule("purchase", "event", one_of=("purchase", "refund", "7"))


def test_rows_that_carry_their_labels_are_read_as_prepare_reads_them() -> None:
    rows = [
        {"click": 1, "rating": 5},
        {"click": "0", "rating": "3.5"},
        {"click": True, "rating": 4},
        {"click": 0.0, "rating": 1},
    ]
    labels = raw_labels(rows, [CLICK, LIKE])
    assert labels.lacking is None and labels.values.tolist() == [[1, 1], [0, 0], [1, 1], [0, 0]]
    # rows from a serving system carry none: nothing to say
    none = raw_labels([{"item": "a"}, {"rating": None}], [CLICK, LIKE], first=5)
    assert none.lacking == (5, "click") and not none.carried and none.unmeasured is None
    # some carry them: the first row without one is named, by its number in the file
    some = raw_labels([{"click": 1}, {"click": ""}], [CLICK], first=11)
    assert some.unmeasured == "row 12 has no 'click'"
    # batches of a file: as the rows of one
    joined = RawLabels.joined([labels, raw_labels([{"click": 1, "rating": 2}], [CLICK, LIKE])])
    assert joined.lacking is None and joined.values.tolist()[-2:] == [[0, 0], [1, 0]]
    assert RawLabels.joined([labels, none]).unmeasured == "row 5 has no 'click'"
    # a label by values: each value as prepare reads it as text (an integer's digits, a
    # float's shortest text, a boolean's true/false); a blank one is no label
    events = [{"event": v} for v in ("purchase", "page_view", 7, 7.0, True, "refund", " ")]
    read = raw_labels(events, [PURCHASE], first=1)
    assert read.values[:, 0].tolist() == [1, 0, 1, 1, 0, 1, 0] and read.lacking == (7, "event")


@pytest.mark.parametrize(
    ("value", "label", "words"),
    [
        (2, CLICK, "row 1: 'click' must be 0 or 1 (the label 'click'), got 2"),
        ("yes", CLICK, "row 1: 'click' must be 0 or 1 (the label 'click'), got 'yes'"),
        (
            "five",
            LIKE,
            "row 1: 'rating' must be a number, got 'five' (the label 'like': rating >= 4)",
        ),
        (
            ["purchase"],
            PURCHASE,
            "row 1: 'event' must be a string, got ['purchase'] (the label 'purchase': event "
            "in ('purchase', 'refund', '7'))",
        ),
    ],
)
def test_a_label_value_that_is_not_one_is_named(value, label, words) -> None:
    with pytest.raises(RawInputError, match=re.escape(words)):
        raw_labels([{label.column: value}], [label])


def test_a_release_year_that_is_no_year_reads_as_missing(ml100k) -> None:
    """'inf' is a float Python reads, and no year (it once raised OverflowError)."""
    from nas.data.raw import normalise_year

    assert [normalise_year(v) for v in ("1995", "1995.0", "inf", "-Infinity", "nan", "")] == [
        "1995", "1995", "", "", "", "",
    ]  # fmt: skip
    row = dict(ml100k.raw_rows("test", 1)[0], release_year="INFINITY")
    year = next(j for j, r in enumerate(ml100k.raw_form().categorical) if r.get("year"))
    features = ml100k.raw_form().features([row], ml100k.schema)
    assert int(features.categorical[0, year]) == 0  # missing


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (1_700_000_000, 1_700_000_000),
        (1_700_000_000.9, 1_700_000_000),
        (-1.5, -2),  # floored, as prepare floors
        ("1700000000", 1_700_000_000),
        ("2023-11-14T22:13:20", 1_700_000_000),  # naive: UTC
        ("2023-11-15T00:13:20+02:00", 1_700_000_000),
        (datetime.datetime(2023, 11, 14, 22, 13, 20, 999_999), 1_700_000_000),
        (datetime.date(2023, 11, 14), 1_699_920_000),
    ],
)
def test_a_time_is_read_as_prepare_reads_it(ml100k, value, seconds) -> None:
    """MovieLens's `timestamp` (an "integer" column: a time) given as a team's logs give it."""
    from nas.data.raw import DERIVED

    _, rows = raw_rows(ml100k, "test", 1)
    form = ml100k.raw_form()
    encoded = form.features([{**rows[0], "timestamp": value}], ml100k.schema)
    hour = next(j for j, r in enumerate(form.categorical) if r.get("derive") == "hour")
    want = form.category(form.categorical[hour], str(DERIVED["hour"](seconds)))
    assert int(encoded.categorical[0, hour]) == want
    assert int(encoded.history.now[0]) == seconds


@pytest.mark.parametrize(
    ("kind", "value", "read"),
    [
        ("number", "pd.NA", None),
        ("number", float("nan"), None),
        ("number", " NA ", None),
        ("number", True, 1.0),
        ("string", "pd.NA", ""),
        ("string", "pd.NaT", ""),
        ("string", 3.0, "3"),
        ("string", False, "false"),
        ("strings", float("nan"), []),  # pandas' missing list in an object column
        ("strings", np.array(["a", "b"], dtype=object), ["a", "b"]),
        ("strings", [7, None, "x"], ["7", "", "x"]),
        ("events", np.array([{"item": "i1", "action": 2, "time": 5}]), [["i1", 2, 5]]),
    ],
)
def test_a_value_as_pandas_or_another_writer_holds_it_is_read_as_prepare_reads_it(
    kind, value, read
) -> None:
    """A served value as a pandas frame (MLflow's pyfunc), a CSV or JSON gives it: pandas' NA
    and NaT, NaN, a list as a numpy array, integer ids, booleans and floats in text columns."""
    import pandas as pd

    from nas.data.raw import convert

    value = (
        {"pd.NA": pd.NA, "pd.NaT": pd.NaT}.get(value, value) if isinstance(value, str) else value
    )
    assert convert(1, "c", kind, value) == read
