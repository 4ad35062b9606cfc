"""`table_features` and `table_labels` (a Parquet batch encoded a column at a time) against
the rows' own encoding, `RawForm.features` and `raw_labels`, on real prepared datasets:
where the columns path takes a table it gives the same arrays; where the rows refuse it,
it leaves the table to them."""

from __future__ import annotations

import datetime
import json
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nas.data import prepare_dataset
from nas.data.labels import LabelRule, raw_labels, table_labels
from nas.data.raw import RawForm, RawInputError
from nas.data.raw_table import EVENTS, rows_table, table_features
from tests.data.test_schema_file import logs, schema_file


@pytest.fixture(scope="module")
def own_logs(tmp_path_factory):
    """A schema file's dataset: vocabularies with missing and out-of-vocabulary ids, a
    hashed field, log1p and standardized dense values, a list column, a plain history."""
    folder = tmp_path_factory.mktemp("own")
    return prepare_dataset(str(schema_file(folder)), folder / "cache")[0]


def same(fast, rows) -> None:
    """Two ``Features`` hold the same arrays."""
    for name in ("categorical", "multi_hot", "dense", "label"):
        assert np.array_equal(getattr(fast, name).numpy(), getattr(rows, name).numpy()), name
    assert (fast.history is None) == (rows.history is None)
    if fast.history is not None:
        for name in ("item", "action", "time", "start", "end", "now"):
            a, b = getattr(fast.history, name).numpy(), getattr(rows.history, name).numpy()
            assert np.array_equal(a, b), name
        assert np.array_equal(fast.history.tensor().numpy(), rows.history.tensor().numpy())


def agrees_with_rows(fast, form, schema, rows) -> None:
    """What the columns path gave is the rows' encoding, or None where the rows refuse."""
    try:
        want = form.features(rows, schema)
    except RawInputError:
        assert fast is None
    else:
        if fast is not None:
            same(fast, want)


def test_a_parquet_batch_of_logs_encodes_by_column_as_its_rows_do(own_logs) -> None:
    """The logs as a team's Parquet holds them (nulls, NaN, lists, unknown values)."""
    frame = logs(300, seed=1)  # another draw: values the vocabularies have not seen
    table = pa.Table.from_pandas(frame, preserve_index=False)
    form, schema = own_logs.raw_form(), own_logs.schema
    fast = table_features(form, table, schema)
    assert fast is not None
    same(fast, form.features(table.to_pylist(), schema))
    # dictionary-encoded columns, lists joined into text at the separator, ids as integers
    text = table.set_column(
        table.column_names.index("genres"),
        "genres",
        pa.array(["|".join(g) for g in frame["genres"]]),
    ).set_column(
        table.column_names.index("site"), "site", pa.array(frame["site"]).dictionary_encode()
    )
    text = text.set_column(text.column_names.index("item_id"), "item_id", pa.array(range(300)))
    fast = table_features(form, text, schema)
    assert fast is not None
    same(fast, form.features(text.to_pylist(), schema))
    # numbers as text (a CSV's), the history absent
    strings = text.drop(["hist"]).set_column(
        text.column_names.index("count"),
        "count",
        pa.array(["" if math.isnan(c) else f"{c:g}" for c in frame["count"]]),
    )
    fast = table_features(form, strings, schema)
    assert fast is not None and int(fast.history.end.max()) == 0
    same(fast, form.features(strings.to_pylist(), schema))


def test_movielens_rows_without_a_history_encode_by_column(ml100k) -> None:
    """Prefixes, release years, hours and weekdays derived from the time."""
    rows = ml100k.raw_rows("test", 200)
    form, schema = ml100k.raw_form(), ml100k.schema
    bare = pa.Table.from_pylist([{k: v for k, v in r.items() if k != "history"} for r in rows])
    fast = table_features(form, bare, schema)
    assert fast is not None
    same(fast, form.features(bare.to_pylist(), schema))
    want = ml100k.features("test")[slice(0, 200)]
    assert np.array_equal(fast.categorical.numpy()[:, :-2], want.categorical.numpy()[:, :-2])
    # times as numbers with fractions (floored), as date-times, as text
    at = bare.column_names.index("timestamp")
    for times in (
        pa.array([1_700_000_000.7, -3600.5, 86_399.999]),
        pa.array([datetime.datetime(1969, 12, 31, 22, 59, 59, 500_000)] * 3, pa.timestamp("ms")),
        pa.array(["2023-11-14T22:13:20.5", "-3600.5", "1969-12-31"]),
    ):
        timed = bare.slice(0, 3).set_column(at, "timestamp", times)
        fast = table_features(form, timed, schema)
        assert fast is not None, times
        same(fast, form.features(timed.to_pylist(), schema))


def test_movielens_histories_encode_by_column_in_each_form_a_file_holds_them(ml100k) -> None:
    """Real rows with their [item, action, time] events, as JSON lines give them (made a
    table), as Parquet's structs (an extra field ignored), as triples of one type (a CSV's
    text), as JSON text (MLflow's frame): each the rows' own encoding."""
    rows = ml100k.raw_rows("test", 300)
    rows[1] = {**rows[1], "history": []}
    form, schema = ml100k.raw_form(), ml100k.schema
    want = form.features(rows, schema)
    assert int((want.history.end - want.history.start).sum()) > 1000
    table = rows_table(form, rows)
    assert table is not None and table.schema.field("history").type == EVENTS
    same(table_features(form, table, schema), want)
    at = table.column_names.index("history")

    def history(values, kind=None):
        return table.set_column(at, "history", pa.array(values, kind))

    objects = [
        [{"item": i, "action": a, "time": t, "dwell": 0.5} for i, a, t in r["history"]]
        for r in rows
    ]
    structs = history(objects)
    same(table_features(form, structs, schema), want)
    same(form.features(structs.to_pylist(), schema), want)
    # times as Parquet's timestamps (a fraction of a second floored), as a row's time reads
    utc = datetime.UTC
    stamped = [
        [{"item": i, "action": a, "time": datetime.datetime.fromtimestamp(t + 0.25, utc)}
         for i, a, t in r["history"]]
        for r in rows
    ]  # fmt: skip
    stamp = pa.timestamp("ms", "UTC")
    kind = pa.struct([("item", pa.string()), ("action", pa.int64()), ("time", stamp)])
    stamps = history(stamped, pa.list_(kind))
    same(table_features(form, stamps, schema), want)
    same(form.features(stamps.to_pylist(), schema), want)
    text = [[[i, str(a), str(t)] for i, a, t in r["history"]] for r in rows]
    same(table_features(form, history(text, pa.list_(pa.list_(pa.string()))), schema), want)
    same(table_features(form, history([json.dumps(r["history"]) for r in rows]), schema), want)
    ints = history([[[7, 3, 100], [8, 9, 101]]] * len(rows), pa.list_(pa.list_(pa.int64())))
    same(table_features(form, ints, schema), form.features(ints.to_pylist(), schema))
    # none (null, empty text, absent): the row's own time is still its "now"
    none = form.features([{**r, "history": []} for r in rows], schema)
    for empty in (history([None] * len(rows), pa.string()), history([""] * len(rows))):
        same(table_features(form, empty, schema), none)
    same(table_features(form, table.drop(["history"]), schema), none)
    # a form whose rows have no time of their own: a row's last event's time is its "now"
    data = form.to_dict()
    data["history"] = {k: v for k, v in data["history"].items() if k != "now"}
    timeless = RawForm.from_dict(data)
    same(table_features(timeless, table, schema), timeless.features(rows, schema))
    # what the rows refuse (or read otherwise) is left to them
    for odd in ([["x", 1.5, 3]], [["x", True, 3]], [["x", 1]], [{"item": "x"}], [None]):
        odd_table = rows_table(form, [{**rows[0], "history": odd}])
        assert odd_table is None or table_features(form, odd_table, schema) is None, odd
    assert table_features(form, history(["null"] * len(rows)), schema) is None
    floats = history([[[1.0, 2.0, 3.0]]] * len(rows))
    assert table_features(form, floats, schema) is None


# --- any table: the columns path agrees with the rows or leaves the table to them ------------

WORDS = ["", "a", "b", "i3", "i7", "x", "y", "u1", "nope"]
ITEM = st.sampled_from(WORDS)
EVENT = st.tuples(ITEM, st.integers(-1, 8), st.integers(0, 2_000_000_000)).map(list)
ODD_EVENT = st.one_of(
    st.tuples(
        st.one_of(ITEM, st.integers(0, 9), st.booleans(), st.none()),
        st.one_of(st.integers(-1, 8), st.floats(-2, 9), st.booleans(), st.sampled_from(["3", ""])),
        st.one_of(st.integers(-(2**64), 2**64), st.sampled_from(["5", "1.5"]), st.none()),
    ).map(list),
    st.fixed_dictionaries({"item": ITEM, "action": st.integers(-1, 8), "time": st.integers(0, 9)}),
    st.lists(ITEM, max_size=4),
    st.none(),
)
EVENT_TEXT = st.one_of(st.lists(EVENT, max_size=3).map(json.dumps), st.sampled_from(["null", "["]))
VALUES = {  # a column's values of each kind: those its own kind reads, then odd ones
    "text": st.one_of(st.none(), st.sampled_from(WORDS), st.text()),
    "integer": st.one_of(st.none(), st.integers(0, 2_000_000_000)),
    "float": st.one_of(
        st.none(), st.floats(-1e6, 1e6), st.sampled_from([math.nan, -0.0, 3.0, -2.5])
    ),
    "list": st.one_of(st.none(), st.lists(st.sampled_from(WORDS), max_size=6)),
    "huge integer": st.integers(-(2**63), 2**63 - 1),
    "any float": st.floats(allow_nan=True, allow_infinity=True),
    "bool": st.one_of(st.none(), st.booleans()),
    "list of nulls": st.lists(st.one_of(st.none(), st.sampled_from(WORDS)), max_size=3),
    "int list": st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3)),
    "date-time": st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1)),
    "date": st.dates(datetime.date(1900, 1, 1), datetime.date(2200, 1, 1)),
    "time text": st.one_of(
        st.sampled_from(["2024-05-07", "2024-05-07 10:00:01.5", "1700000000.5", "soon"]),
        st.datetimes().map(str),
    ),
    # an "events" column: as JSON gives them (triples, objects, their text, odd ones among
    # them), then as a Parquet file types them
    "events": st.one_of(
        st.none(),
        st.just(""),
        st.lists(EVENT, max_size=4),
        st.lists(st.one_of(EVENT, ODD_EVENT), max_size=3),
        EVENT_TEXT,
    ),
    "event structs": st.one_of(
        st.none(),
        st.lists(
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "item": st.one_of(st.none(), ITEM),
                        "action": st.one_of(st.none(), st.integers(-1, 8)),
                        "time": st.integers(0, 2_000_000_000),
                    }
                ),
            ),
            max_size=4,
        ),
    ),
    "event lists": st.one_of(
        st.none(),
        st.lists(
            st.one_of(
                st.none(),
                st.lists(
                    st.one_of(st.none(), st.sampled_from(["a", "i3", "5", "-1", "8", "1.0"])),
                    min_size=2,
                    max_size=4,
                ),
            ),
            max_size=4,
        ),
    ),  # fmt: skip
    "int event lists": st.one_of(
        st.none(), st.lists(st.lists(st.integers(-1, 8), min_size=2, max_size=4), max_size=4)
    ),
    "events text": st.one_of(st.none(), EVENT_TEXT),
}
TYPES = {
    "text": pa.string(),
    "integer": pa.int64(),
    "float": pa.float64(),
    "list": pa.list_(pa.string()),
    "huge integer": pa.int64(),
    "any float": pa.float64(),
    "bool": pa.bool_(),
    "list of nulls": pa.list_(pa.string()),
    "int list": pa.list_(pa.int64()),
    "date-time": pa.timestamp("us"),
    "date": pa.date32(),
    "time text": pa.string(),
    "events": None,  # as Arrow infers them, where it can
    "event structs": EVENTS,
    "event lists": pa.list_(pa.list_(pa.string())),
    "int event lists": pa.list_(pa.list_(pa.int64())),
    "events text": pa.string(),
}
NATURAL = {
    "string": "text",
    "integer": "integer",
    "number": "float",
    "strings": "list",
    "events": "events",
}
TABLE_EVENTS = ["event structs", "event lists", "int event lists", "events text"]


@st.composite
def tables(draw, columns: dict[str, dict], labels: list[str]):
    """A table of some of ``columns`` (a raw form's) and of the label columns, each of its
    own kind but for at most two, of any kind."""
    rows = draw(st.integers(1, 6))
    odd = draw(st.sets(st.sampled_from(list(columns)), max_size=2))
    fields, arrays = [], []
    for name in list(columns) + labels:
        if draw(st.integers(0, 3)) == 0 and name not in labels:
            continue  # absent
        if name in odd:
            kind = draw(st.sampled_from(list(VALUES)))
        elif name not in columns:
            kind = "integer"
        elif columns[name]["type"] == "events":
            kind = draw(st.sampled_from(TABLE_EVENTS))
        else:
            kind = NATURAL[columns[name]["type"]]
        values = draw(st.lists(VALUES[kind], min_size=rows, max_size=rows))
        if name in labels and draw(st.booleans()):
            values = draw(st.lists(st.sampled_from([0, 1, None, 0.0, 1.0, 2]), min_size=rows,
                                   max_size=rows))  # fmt: skip
        try:
            array = pa.array(values, type=None if name in labels else TYPES[kind])
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            assume(False)
        if draw(st.booleans()) and pa.types.is_string(array.type):
            array = array.dictionary_encode()
        fields.append(name)
        arrays.append(array)
    if not fields:
        return pa.table({"unrelated": pa.array([1] * rows)})
    return pa.table(dict(zip(fields, arrays, strict=True)))


def varied(form: RawForm) -> RawForm:
    """``form`` with other fills and transforms of its dense fields."""
    data = form.to_dict()
    data["dense"] = [
        recipe | {"fill": 2.5 - i, "transform": ("identity", "log1p", "standardize")[i % 3]}
        for i, recipe in enumerate(form.dense)
    ]
    return RawForm.from_dict(data)


@pytest.mark.parametrize("dataset", ["own_logs", "own_logs varied", "ml100k"])
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_table_encodes_as_its_rows_do_or_is_left_to_them(request, dataset, data) -> None:
    prepared = request.getfixturevalue(dataset.split()[0])
    form, schema = prepared.raw_form(), prepared.schema
    form = varied(form) if dataset.endswith("varied") else form
    recipes = [LabelRule.of(r) for r in prepared.manifest["label_columns"]]
    table = data.draw(tables(form.columns, [r.column for r in recipes]))
    rows = table.to_pylist()
    agrees_with_rows(table_features(form, table, schema), form, schema, rows)
    labels = table_labels(table, recipes, first=3)
    try:
        want_labels = raw_labels(rows, recipes, first=3)
    except RawInputError:
        assert labels is None
    else:
        if labels is not None:
            assert np.array_equal(labels.values, want_labels.values)
            assert (labels.lacking, labels.carried) == (want_labels.lacking, want_labels.carried)


def test_label_columns_of_numbers_read_as_the_rows_read_them() -> None:
    recipes = [LabelRule("click", "click"), LabelRule("like", "rating", at_least=4)]
    table = pa.table({"click": [1, 0, True and 1], "rating": [5.0, 3.5, 4]})
    labels = table_labels(table, recipes, first=10)
    assert labels.values.tolist() == [[1, 1], [0, 0], [1, 1]] and labels.lacking is None
    lacking = table_labels(pa.table({"click": [1, None], "rating": [5, 2]}), recipes, first=10)
    assert lacking.lacking == (11, "click") and lacking.carried
    assert lacking.unmeasured == raw_labels([{"click": 1, "rating": 5}, {"rating": 2}], recipes,
                                            first=10).unmeasured  # fmt: skip
    assert table_labels(pa.table({"click": [2], "rating": [1]}), recipes) is None
    assert table_labels(pa.table({"click": ["1"], "rating": [1]}), recipes) is None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(list(VALUES)), data=st.data())
def test_a_label_by_values_reads_any_column_as_its_rows_do(kind, data) -> None:
    """A label 1 where the value is one of some (GA4's event_name is purchase): a column of
    any kind read as its rows read it, or left to them."""
    values = data.draw(st.lists(VALUES[kind], min_size=1, max_size=6))
    try:
        array = pa.array(values, TYPES[kind])
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        assume(False)
    if data.draw(st.booleans()) and pa.types.is_string(array.type):
        array = array.dictionary_encode()
    held = [str(v).lower() if isinstance(v, bool) else str(v) for v in values if v is not None]
    one_of = data.draw(st.lists(st.sampled_from([*held, "3", "purchase"]), min_size=1))
    rules = [LabelRule("bought", "event", one_of=tuple(one_of))]
    table = pa.table({"event": array})
    labels = table_labels(table, rules, first=4)
    try:
        want = raw_labels(table.to_pylist(), rules, first=4)
    except RawInputError:
        assert labels is None
        return
    assert labels is not None or kind not in ("text", "integer", "float", "bool")
    if labels is not None:
        assert np.array_equal(labels.values, want.values), (values, one_of)
        assert (labels.lacking, labels.carried) == (want.lacking, want.carried)


@st.composite
def text_rows(draw, columns: dict[str, dict]):
    """Rows as JSON lines give them: each its own keys, an odd column's values of any kind
    from row to row, now and then a row that is not one."""
    odd = draw(st.sets(st.sampled_from(list(columns)), max_size=2))
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 12)) == 0:
            rows.append(draw(st.sampled_from([{}, {"unrelated": 1}, 5, None, []])))
            continue
        row = {}
        for name, column in columns.items():
            if draw(st.integers(0, 4)) == 0:
                continue
            natural = NATURAL[column["type"]]
            kind = draw(st.sampled_from(list(VALUES))) if name in odd else natural
            row[name] = draw(VALUES[kind])
        rows.append(row)
    return rows


@pytest.mark.parametrize("dataset", ["own_logs", "ml100k"])
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_text_rows_encode_by_column_as_they_do_by_row_or_are_left_to_them(
    request, dataset, data
) -> None:
    prepared = request.getfixturevalue(dataset)
    form, schema = prepared.raw_form(), prepared.schema
    rows = data.draw(text_rows(form.columns))
    table = rows_table(form, rows)
    fast = None if table is None else table_features(form, table, schema)
    agrees_with_rows(fast, form, schema, rows)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_history_encodes_by_column_as_its_rows_do_or_is_left_to_them(ml100k, data) -> None:
    """Real rows, each with a history of one of the forms JSON or Parquet give (odd events
    among them: floats, booleans, nulls, text, out-of-range actions, wrong lengths)."""
    form, schema = ml100k.raw_form(), ml100k.schema
    kind = data.draw(st.sampled_from(["events", *TABLE_EVENTS]))
    n = data.draw(st.integers(1, 6))
    histories = data.draw(st.lists(VALUES[kind], min_size=n, max_size=n))
    rows = [
        {**row, "history": h} for row, h in zip(ml100k.raw_rows("test", n), histories, strict=True)
    ]
    if kind == "events":  # JSON lines
        table = rows_table(form, rows)
    else:
        try:
            table = pa.Table.from_pylist(rows).set_column(
                list(rows[0]).index("history"), "history", pa.array(histories, TYPES[kind])
            )
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            assume(False)
        rows = table.to_pylist()
    fast = None if table is None else table_features(form, table, schema)
    agrees_with_rows(fast, form, schema, rows)


def test_text_rows_of_plain_columns_make_a_table_and_mixed_ones_do_not(own_logs) -> None:
    form = own_logs.raw_form()
    table = rows_table(form, [{"site": "a", "count": 2}, {"price": 1.5, "genres": ["x"]}])
    assert table is not None and table.column("count").to_pylist() == [2, None]
    assert rows_table(form, [{"count": 1.5}, {"count": True}]) is None  # Arrow: [1.5, 1.0]
    assert rows_table(form, [{"site": "a"}, {"site": 7}]) is None  # mixed types
    assert rows_table(form, [{"site": "a"}, {"elsewhere": 1}]) is None  # none of its columns


def test_times_of_a_team_s_parquet_predict_as_they_were_prepared(tmp_path) -> None:
    """Parquet timestamps to the microsecond (Spark's), zoned or not: prepare floors them to
    their second (it refused them once), and a batch of the same file encodes, by row and
    by column, to the very ids prepare gave."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    rows = 500
    micros = (1_700_000_000 + rng.integers(-(10**9), 10**6, rows)) * 10**6
    micros += rng.integers(0, 10**6, rows)
    (tmp_path / "data").mkdir()
    for name, tz in (("utc", "UTC"), ("naive", None)):
        table = pa.table(
            {
                "click": rng.integers(0, 2, rows),
                "ts": pa.array(micros, pa.timestamp("us", tz)),
                "site": rng.choice(["a", "b", "c"], rows),
            }
        )
        path = tmp_path / "data" / f"{name}.parquet"
        pq.write_table(table, path)
        schema = tmp_path / f"{name}.yaml"
        schema.write_text(
            f"name: times_{name}\nsource: {{format: parquet, path: data/{name}.parquet}}\n"
            "labels: [click]\nkeys: {timestamp: ts}\nsplit: {method: random, valid: 0.1, "
            "test: 0.1}\nfeatures:\n  - {name: site, type: categorical}\n"
            "  - {name: hour, type: categorical, from: ts, derive: hour}\n"
            "  - {name: weekday, type: categorical, from: ts, derive: weekday}\n"
        )
        dataset = prepare_dataset(str(schema), tmp_path / "cache")[0]
        seconds = np.floor_divide(micros, 10**6)
        stored = np.empty(rows, dtype=np.int64)
        stored[np.asarray(dataset.array("source_row"))] = np.asarray(dataset.array("timestamp"))
        assert np.array_equal(stored, seconds)
        prepared = np.empty((rows, 3), dtype=np.int64)
        prepared[np.asarray(dataset.array("source_row"))] = np.asarray(dataset.array("categorical"))
        form = dataset.raw_form()
        fast = table_features(form, table, dataset.schema)
        assert fast is not None
        by_rows = form.features(table.to_pylist(), dataset.schema)
        same(fast, by_rows)
        assert np.array_equal(fast.categorical.numpy(), prepared)
