"""Property-based fuzzing of what users type: search YAML, spec JSON, `nas submit` flags,
and the rows and columns of any Arrow type they score.

Each input is a valid one with something broken in it (a value of the wrong kind, size or
sign, NaN, a huge integer, deep nesting, a duplicate key, bytes that are not UTF-8, a long
string). The property: the input is accepted, or refused with exit 2 and one short
paragraph that names what is wrong; never a traceback, a hang, or a file written.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nas.cli import main
from nas.core.errors import NasError

FUZZ = settings(
    max_examples=120,
    deadline=None,
    database=None,  # no .hypothesis folder in the checkout
    derandomize=True,  # the same examples on every run: CI is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

SEARCH = {
    "name": "fuzz",
    "dataset": "movielens-100k",
    "space": {"name": "ctr_stack", "options": {"max_depth": 2, "embedding_dims": [8, 16]}},
    "strategy": {"name": "evolution", "options": {"population_size": 4}},
    "objectives": ["ne", {"name": "flops", "reference": 5.0e5}],
    "budget": {"candidates": 2, "steps": 10, "max_minutes": 5},
    "train": {"batch_size": 256, "lr": 0.002},
    "resources": {"concurrency": 2, "cpus_per_trial": 1, "memory_gb_per_trial": 4},
    "seed": 0,
    "include_baselines": False,
}
SPEC = {
    "embedding_dim": 16,
    "interaction": [
        {"block": "dcnv2", "num_layers": 2, "rank": 16},
        {"block": "hstu", "num_heads": 2, "time_base": 2.0},
    ],
    "top_mlp": [64, 32],
    "top_input": "last",
}

huge = st.integers(min_value=2**31, max_value=2**70) | st.just(10**5000)
bad_number = (
    huge
    | huge.map(lambda n: -n)
    | st.integers(-3, 0)
    | st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e-308, 0.5])
)
bad_value = (
    bad_number
    | st.text(max_size=20)
    | st.just("x" * 100_000)
    | st.none()
    | st.booleans()
    | st.lists(st.integers(), max_size=3)
    | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
    | st.just([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])
)


def _paths(node, prefix=()):
    """Every place a value sits in a nested config: (key or index, ...) tuples."""
    yield prefix
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, child in items:
        yield from _paths(child, (*prefix, key))


def _replace(node, path, value):
    if not path:
        return value
    copy = dict(node) if isinstance(node, dict) else list(node)
    copy[path[0]] = _replace(node[path[0]], path[1:], value)
    return copy


def _mutations(base):
    paths = [p for p in _paths(base) if p]
    return st.tuples(st.sampled_from(paths), bad_value).map(lambda pv: _replace(base, *pv))


def _dump_json(data) -> str:
    """JSON text, with integers beyond Python's printing limit written out in full (reading
    them back is what recnas must survive)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(data)
    finally:
        sys.set_int_max_str_digits(limit)


def _check_refusal(code: int, err: str, runs: Path) -> None:
    assert code in (0, 2), err
    assert "Traceback" not in err, err
    if code == 2:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        assert lines and lines[0].startswith("error:"), err
        assert len(err) < 2_000, f"{len(err)} characters: a long value was echoed"
    written = [p for p in runs.rglob("*") if p.is_file()] if runs.exists() else []
    assert not written, f"written on a refused input: {written}"


@pytest.fixture
def runs(tmp_path: Path, monkeypatch, ml100k) -> Path:
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COLUMNS", "100")
    return tmp_path / "runs"


def _submit_checks_only(path: Path, capsys, *flags: str) -> tuple[int, str]:
    """`nas submit` in this process, on a config that is refused (the caller makes sure)."""
    try:
        code = main(["submit", str(path), *flags])
    except SystemExit as exit:  # argparse refuses a flag's type
        code = exit.code
    return code, capsys.readouterr().err


@FUZZ
@given(config=_mutations(SEARCH))
def test_fuzzed_search_yaml_is_accepted_or_refused_in_one_paragraph(
    config, runs: Path, tmp_path: Path, capsys
) -> None:
    text = _dump_json(config)  # YAML is a superset of JSON
    path = tmp_path / "search.yaml"
    path.write_text(text)
    from nas.service.config import load_config
    from nas.service.plan import plan

    try:
        checked = plan(load_config(path), tmp_path)
    except NasError as err:
        message = str(err)
        assert "\n" not in message.strip() or len(message) < 2_000
        assert len(message) < 2_000
        return
    assert checked.config.name  # accepted: a whole, valid config (e.g. a name "NaN")
    _check_refusal(0, "", runs)


@FUZZ
@given(spec=_mutations(SPEC))
def test_fuzzed_spec_json_is_a_model_or_one_clear_error(spec, ml100k) -> None:
    from nas.arch.model import model_configs
    from nas.arch.spec import ArchSpec

    try:
        model_configs(ArchSpec.from_json(_dump_json(spec), "spec.json"), ml100k.schema)
    except NasError as err:
        assert len(str(err)) < 2_000, "a long value was echoed"


BROKEN_FILES = [
    b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe binary",
    b"name: a\nname: b\nspace: {name: ctr_stack}\n",  # a duplicate key
    b"[" * 5_000 + b"]" * 5_000,
    b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
    + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n".encode()
        for i in range(8)
    ),  # aliases standing for 9**9 values
    b"name: t\nspace: {name: ctr_stack}\nseed: " + b"9" * 5_000 + b"\n",
    b"name: t\nspace: {name: ctr_stack}\nseed: 9223372036854775808\n",
    b"name: t\nspace: {name: ctr_stack}\nobjectives: [{name: ne, reference: .nan}]\n",
    b"name: t\nspace: {name: ctr_stack}\nbudget: {max_minutes: .inf}\n",
    b"name: t\nspace: {name: ctr_stack, options: {max_depth: " + b"1" * 100 + b"}}\n",
    b"name: " + b"x" * 1_000_000 + b"\n",
    b"",
    b"- just\n- a list\n",
]


@pytest.mark.parametrize("content", BROKEN_FILES, ids=range(len(BROKEN_FILES)))
def test_broken_files_are_refused_in_one_paragraph(
    content: bytes, runs: Path, tmp_path: Path, capsys
) -> None:
    path = tmp_path / "search.yaml"
    path.write_bytes(content)
    code, err = _submit_checks_only(path, capsys)
    assert code == 2, err
    _check_refusal(code, err, runs)


@FUZZ
@given(
    flag=st.sampled_from(["--budget", "--steps", "--seed", "--concurrency", "--name"]),
    value=st.one_of(
        st.integers(-(2**70), 0).map(str),
        st.integers(2**63, 2**70).map(str),
        st.text(min_size=1, max_size=30).filter(lambda t: not t.startswith("-")),
        st.just("9" * 5_000),
    ),
)
def test_fuzzed_flags_are_refused_in_one_paragraph(
    flag: str, value: str, runs: Path, tmp_path: Path, capsys
) -> None:
    path = tmp_path / "search.yaml"
    never_runs = {**SEARCH, "space": {"name": "no-such-space"}}  # whatever the flag says
    path.write_text(json.dumps(never_runs))
    code, err = _submit_checks_only(path, capsys, flag, value)
    assert code == 2, err
    if "usage:" not in err:  # argparse's own refusal is two lines: usage, then the error
        _check_refusal(code, err, runs)
    assert "Traceback" not in err and len(err) < 2_000


@pytest.mark.parametrize("kind", ["missing", "folder", "device", "too long"])
@pytest.mark.parametrize(
    "command",
    [["predict", "models:/ranker@prod", "--input"], ["fp8", "probe", "x.json", "--weights"]],
)
def test_a_path_that_is_not_a_file_is_named_for_what_it_is(
    command: list[str], kind: str, runs: Path, tmp_path: Path, capsys
) -> None:
    path, words = {
        "missing": (tmp_path / "rows.jsonl", "no file at"),
        # predict reads a folder's files of rows; this one has none
        "folder": (tmp_path, "is a folder with no" if command[0] == "predict" else "is a folder,"),
        "device": (Path("/dev/null"), "is not a regular file"),
        "too long": (tmp_path / ("x" * 300), "File name too long"),
    }[kind]
    code = main([*command, str(path)])
    err = capsys.readouterr().err
    _check_refusal(code, err, runs)
    assert code == 2 and f"{command[-1]}: " in err and words in " ".join(err.split()), err


@pytest.mark.parametrize(
    "command",
    [
        ["list", "--registry-url", "sqlite:///{long}/registry.db"],
        ["models", "list", "--tracking-uri", "sqlite:///{long}/mlflow.db"],
        ["data", "inspect", "movielens-100k", "--cache-dir", "{long}"],
        ["export", "models:/ranker@prod", "--out", "{long}/model"],
        ["data", "prepare", "criteo", "--source", "{long}.tsv"],
        ["data", "export", "movielens-100k", "--out", "{long}.parquet"],
        ["data", "rows", "movielens-100k", "--out", "{long}.jsonl"],
        ["predict", "models:/ranker@prod", "--input", "rows.jsonl", "--out", "{long}.jsonl"],
    ],
)
def test_a_path_the_system_refuses_is_named_not_a_traceback(
    command: list[str], runs: Path, tmp_path: Path, capsys
) -> None:
    """A name longer than the file system allows (or a folder that may not be searched)."""
    long = str(tmp_path / ("x" * 300))
    try:
        code = main([part.format(long=long) for part in command])
    except SystemExit as exit:  # argparse refuses a flag's type
        code = exit.code
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err, err
    assert "File name too long" in err and len(err) < 2_000, err


@pytest.mark.parametrize(
    "command",
    [
        ["data", "export", "movielens-100k", "--out", "a\x00.parquet"],
        ["data", "prepare", "movielens-100k", "--cache-dir", "a\x00b"],
        ["export", "models:/ranker@prod", "--out", "a\x00b"],
    ],
)
def test_a_path_holding_a_nul_is_refused_by_its_flag(command: list[str], capsys) -> None:
    """No path holds a NUL; a script calling ``main`` can give one (a shell cannot)."""
    with pytest.raises(SystemExit) as exit:
        main(command)
    err = " ".join(capsys.readouterr().err.split())
    assert exit.value.code == 2 and "a path holds no NUL character" in err, err


@FUZZ
@given(
    row=st.integers(0, 3),
    column=st.sampled_from(["user_id", "item_id", "age", "timestamp", "genres", "history", "x"]),
    value=bad_value | st.sampled_from(["", "nan", "1e400", [None], [[1]], b"bytes", "\ud800"]),
)
def test_fuzzed_rows_to_score_are_encoded_or_refused_naming_row_and_column(
    row: int, column: str, value, ml100k
) -> None:
    """What `nas predict` and the registered model read: rows a user wrote."""
    from nas.data.raw import RawInputError

    rows = ml100k.raw_rows("test", 4)
    rows[row][column] = value
    try:
        features = ml100k.raw_form().features(rows, ml100k.schema)
    except RawInputError as err:
        assert str(err).startswith(f"row {row + 1}: '{column}' "), err
        assert len(str(err)) < 2_000, "a long value was echoed"
        return
    assert features.categorical.shape[0] == 4


def _column_makers(n: int) -> dict:
    """Per kind, a maker of ``n`` values of an Arrow type a team's Parquet may hold where a
    model reads a column."""
    import datetime
    import decimal

    import numpy as np
    import pyarrow as pa

    def cycle(values: list) -> list:  # n of them, in turn
        return [values[i % len(values)] for i in range(n)]

    return {
        "int": lambda: pa.array(cycle([7, -1, 2**62, 0])),
        "uint64": lambda: pa.array(np.full(n, 2**64 - 1, dtype=np.uint64)),
        "float": lambda: pa.array(cycle([math.nan, math.inf, -0.0, 1e308])),
        "float16": lambda: pa.array(np.ones(n, dtype=np.float16)),
        "bool": lambda: pa.array([True] * n),
        "text": lambda: pa.array(cycle(["", "1.5", "[1]", "2023-01-01", "x"])),
        "large text": lambda: pa.array(["i1"] * n, pa.large_string()),
        "binary": lambda: pa.array([b"i1"] * n, pa.binary()),
        "bytes, not text": lambda: pa.array([b"\xa8\xff"] * n, pa.binary()),
        "dictionary": lambda: pa.array(cycle(["a", "b"])).dictionary_encode(),
        "nulls": lambda: pa.nulls(n),
        "typed nulls": lambda: pa.nulls(n, pa.string()),
        "list of text": lambda: pa.array([["i1", None, ""]] * n, pa.list_(pa.string())),
        "list of binary": lambda: pa.array([[b"i1"]] * n, pa.list_(pa.binary())),
        "list of ints": lambda: pa.array([[1, -5]] * n),
        "list of lists": lambda: pa.array([[[1], []]] * n),
        "struct": lambda: pa.array([{"item": "i1", "action": 1, "time": 5}] * n),
        "events": lambda: pa.array([[{"item": "i1", "action": None, "time": 10**12}]] * n),
        "timestamp": lambda: pa.array(
            [datetime.datetime(2023, 1, 1)] * n, pa.timestamp("ms", "UTC")
        ),
        "date": lambda: pa.array([datetime.date(2023, 1, 1)] * n),
        "decimal": lambda: pa.array([decimal.Decimal("1.25")] * n),
        "map": lambda: pa.array([[("a", 1)]] * n, pa.map_(pa.string(), pa.int64())),
    }


@FUZZ
@given(
    column=st.sampled_from(["user_id", "item_id", "age", "timestamp", "genres", "history", "x"]),
    kind=st.sampled_from(sorted(_column_makers(0))),
    rows=st.integers(1, 5),
)
def test_fuzzed_column_types_to_score_are_encoded_or_refused_naming_row_and_column(
    column: str, kind: str, rows: int, ml100k
) -> None:
    """What `nas predict` reads from a Parquet file: a column of any Arrow type, encoded by
    columns (``table_features``) or, where those decline, by its rows, which encode or
    refuse naming the row and the column; never a traceback."""
    import pyarrow as pa

    from nas.data.raw import RawInputError
    from nas.data.raw_table import table_features

    read = ml100k.raw_rows("test", rows)
    for row in read:  # [item, rating, time] triples mix types: as Parquet's event structs
        row["history"] = [
            dict(zip(("item", "action", "time"), e, strict=True)) for e in row["history"]
        ]
    table = pa.Table.from_pylist(read)
    values = _column_makers(rows)[kind]()
    if column in table.column_names:
        table = table.set_column(table.column_names.index(column), column, values)
    else:
        table = table.append_column(column, values)
    form, schema = ml100k.raw_form(), ml100k.schema
    features = table_features(form, table, schema)
    if features is None:
        try:
            features = form.features(table.to_pylist(), schema)
        except RawInputError as err:
            assert re.match(rf"row \d: '{re.escape(column)}(\[\w+\])?' ", str(err)), err
            assert len(str(err)) < 2_000, "a long value was echoed"
            return
    assert features.categorical.shape[0] == rows
