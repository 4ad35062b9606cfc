"""The `nas` command as a user runs it: processes of its own, real data, real exit codes."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nas.arch.spec import ArchSpec
from nas.cli.flags import whole_number
from tests import nas_process

REPO = Path(__file__).resolve().parent.parent
DCNV2 = str(REPO / "examples" / "specs" / "dcnv2.json")


def nas(*args: str, cache: Path | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """A `nas` command in a process of its own, forked from one that imported the libraries
    (``tests/nas_process.py``); ``fresh``: the real script in a fresh interpreter, which alone
    catches an import, or a warning at exit, that a fork hides."""
    env = {**os.environ, "COLUMNS": "120"}
    if cache is not None:
        env["RECNAS_CACHE_DIR"] = str(cache)
    if not fresh:
        return nas_process.run(list(args), env, REPO, 600)
    return subprocess.run(
        [sys.executable, "-m", "nas.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )


def _no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr + done.stdout


pytestmark = pytest.mark.slow


def test_prepare_prints_what_it_built_then_reuses(fresh_cache):
    first = nas("data", "prepare", "movielens-100k", cache=fresh_cache)
    assert first.returncode == 0, first.stderr
    for words in ("100,000", "943", "1,682", "train 80,367", "built in", str(fresh_cache)):
        assert words in first.stdout
    second = nas("data", "prepare", "movielens-100k", "--json", cache=fresh_cache)
    summary = json.loads(second.stdout)
    assert summary["reused_cache"] is True and summary["rows"] == 100_000
    assert summary["split_sizes"] == {"train": 80_367, "valid": 10_037, "test": 9_596}


def test_train_json_on_movielens_100k(ml100k, cache_dir):
    done = nas(
        "train", DCNV2, "--dataset", "movielens-100k", "--steps", "150", "--json", cache=cache_dir,
        fresh=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # nothing at exit either (Triton's nanobind "leaked" warnings)
    result = json.loads(done.stdout)
    for key in (
        "arch_id",
        "ne",
        "auc",
        "logloss",
        "flops",
        "params",
        "train_examples_per_s",
        "seconds",
    ):
        assert key in result
    assert result["arch_id"] == ArchSpec.load(DCNV2).arch_id
    assert 0 < result["ne"] < 0.95 and 0.7 < result["auc"] < 1
    assert result["split"] == "valid" and result["steps"] == 150


def test_train_prints_a_table(ml100k, cache_dir, tmp_path):
    spec = json.loads(Path(DCNV2).read_text()) | {"name": "[/bold] [red]dcnv2"}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = nas("train", str(tmp_path / "spec.json"), "--dataset", "movielens-100k",
               "--steps", "20", cache=cache_dir)  # fmt: skip
    assert done.returncode == 0, done.stderr  # a name rich read as markup failed it
    assert "[/bold] [red]dcnv2 on movielens-100k (valid split)" in done.stdout
    for label in ("NE", "AUC", "FLOPs / example", "train examples/s"):
        assert label in done.stdout


@pytest.mark.parametrize(
    ("spec", "flags", "words"),
    [
        (
            '{"embedding_dim": 8, "interaction": [{"block": "dcn"}], "top_mlp": []}',
            [],
            "Did you mean 'dcnv2'",
        ),
        (
            '{"embedding_dim": 8, "interaction": [{"block": "fm"}, {"block": "fm"}], '
            '"top_mlp": []}',
            [],
            "interaction[1].num_tokens",
        ),
        ('{"embedding_dim": 8, "interaction": [], "top_mlp": []}', ["--steps", "-3"], "--steps"),
        (  # larger than a C integer: it failed in the trainer's deque with a traceback
            '{"embedding_dim": 8, "interaction": [], "top_mlp": []}',
            ["--steps", "9" * 20],
            "--steps: must be an integer from 1 to 10,000,000",
        ),
        (
            '{"embedding_dim": 8, "interaction": [], "top_mlp": []}',
            ["--batch-size", str(2**21)],
            "--batch-size: must be an integer from 1 to 1,048,576",
        ),
        (
            '{"embedding_dim": 8, "interaction": [], "top_mlp": []}',
            ["--dataset", "ml-1m"],
            "movielens-1m",
        ),
        ("{not json", [], "not valid JSON"),
    ],
)
def test_bad_input_is_one_paragraph_and_exit_2(tmp_path, spec, flags, words):
    path = tmp_path / "spec.json"
    path.write_text(spec)
    cache = tmp_path / "cache"
    done = nas("train", str(path), "--dataset", "movielens-100k", *flags, cache=cache)
    assert done.returncode == 2
    _no_traceback(done)
    assert done.stderr.startswith("error:") and words in " ".join(done.stderr.split())
    assert done.stdout == ""
    if (
        "interaction[1]" not in words
    ):  # the shape check needs the dataset; the others must not touch it
        assert not cache.exists(), "a bad input started work"


def test_bad_dataset_options(tmp_path):
    done = nas("data", "prepare", "criteo", cache=tmp_path)
    assert done.returncode == 2 and "--source" in done.stderr
    _no_traceback(done)
    done = nas("data", "prepare", "criteo", "--source", str(tmp_path / "none.tsv"), cache=tmp_path)
    assert done.returncode == 2 and "no Criteo-format file at" in done.stderr
    assert "none.tsv" in done.stderr
    assert not (tmp_path / "criteo").exists()


def test_an_error_prints_the_users_text_as_it_is(tmp_path):
    """Rich would print an emoji for ``:x:`` (a passwd line's, say): not in our messages."""
    from tests.test_search import nas_here

    source = tmp_path / "passwd.tsv"
    source.write_text("root:x:0:0:root:/root:/bin/bash\n")
    done = nas_here(tmp_path / "runs", "data", "prepare", "criteo", "--source", str(source),
                    "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
    assert done.returncode == 2 and "root:x:0:0" in done.stderr


def test_predict_reads_parquet_rows_and_names_a_damaged_file(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nas.core.errors import ConfigError
    from nas.data.row_files import RowFiles

    path = tmp_path / "rows.parquet"
    table = pa.table(
        {"user_id": ["u1", None, "u3"], "genres": [["a", "b"], [], []], "ts": [5, 6, 7]}
    )
    pq.write_table(table, path, row_group_size=2)
    rows = RowFiles(path)
    assert rows.total == 3
    batches = list(rows.batches(2))
    assert [(b.first, len(b)) for b in batches] == [(1, 2), (3, 1)] and rows.done == 3
    assert batches[0].rows == [
        {"user_id": "u1", "genres": ["a", "b"], "ts": 5},
        {"user_id": None, "genres": [], "ts": 6},
    ]
    assert batches[1].head(5) == [{"user_id": "u3", "genres": [], "ts": 7}]
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ConfigError, match=r"rows.parquet: not readable as Parquet \("):
        list(RowFiles(path).batches())


def test_scored_rows_are_written_whole_with_their_probabilities(tmp_path) -> None:
    """`nas predict --out`: Parquet keeps each input column (one whose values mix types, as
    JSON text), the probabilities beside them under a name no input column has; so does CSV
    (a list as its JSON text, a missing value empty); JSON lines hold what --json prints."""
    import csv

    import numpy as np
    import pyarrow.parquet as pq

    from nas.cli.predict import column_types, scored_file
    from nas.data.row_files import RowFiles

    rows = [
        {"user_id": 7, "history": [["i1", 5, 100]], "probability": "mine"},
        {"user_id": "u8", "history": [], "genres": ["a"]},
    ]
    scores = {"probability": np.array([0.25, 0.75], dtype=np.float32)}
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def write_scored(path, batch_size):
        file = RowFiles(source)
        plan = column_types(RowFiles(source)) if path.suffix != ".jsonl" else None
        with scored_file(path, plan) as write:
            for batch in file.batches(batch_size):
                part = slice(batch.first - 1, batch.first - 1 + len(batch))
                write(batch, {k: v[part] for k, v in scores.items()})

    write_scored(tmp_path / "s.parquet", 1)  # each column typed by every row, not the first
    table = pq.read_table(tmp_path / "s.parquet").to_pylist()
    assert table == [
        {"user_id": "7", "history": '[["i1", 5, 100]]', "probability": "mine",
         "genres": None, "_probability": 0.25},
        {"user_id": '"u8"', "history": "[]", "probability": None, "genres": ["a"],
         "_probability": 0.75},
    ]  # fmt: skip
    write_scored(tmp_path / "s.jsonl", 1)
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert lines[1] == {"row": rows[1], "probability": 0.75}
    write_scored(tmp_path / "s.csv", 1)
    with open(tmp_path / "s.csv", newline="") as f:
        assert list(csv.DictReader(f)) == [
            {"user_id": "7", "history": '[["i1", 5, 100]]', "probability": "mine", "genres": "",
             "_probability": "0.25"},
            {"user_id": "u8", "history": "[]", "probability": "", "genres": '["a"]',
             "_probability": "0.75"},
        ]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rows.jsonl", "s.csv", "s.jsonl", "s.parquet"
    ]  # fmt: skip


def test_scored_csv_writes_times_dates_and_decimals_as_their_text(tmp_path) -> None:
    """A Parquet or Avro input's date-times, dates and decimals, written to a scored CSV
    file, are their text (``2024-05-07 12:30:00+00:00``, as Arrow's CSV reader reads a
    date-time back), not JSON's quoted string of it (a cell of ``"2024-05-07 ..."``, quotes
    and all)."""
    import csv
    import datetime
    import decimal

    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from nas.cli.predict import scored_file
    from nas.data.row_files import RowFiles

    at = datetime.datetime(2024, 5, 7, 12, 30, tzinfo=datetime.UTC)
    table = pa.table(
        {
            "ts": pa.array([at], pa.timestamp("ms", "UTC")),
            "day": pa.array([at.date()], pa.date32()),
            "amount": pa.array([decimal.Decimal("3.14")], pa.decimal128(10, 2)),
            "tags": [["a", "b"]],
        }
    )
    pq.write_table(table, tmp_path / "rows.parquet")
    with scored_file(tmp_path / "s.csv", None) as write:
        for batch in RowFiles(tmp_path / "rows.parquet").batches():
            write(batch, {"probability": np.array([0.5], dtype=np.float32)})
    with open(tmp_path / "s.csv", newline="") as f:
        assert list(csv.DictReader(f)) == [
            {"ts": "2024-05-07 12:30:00+00:00", "day": "2024-05-07", "amount": "3.14",
             "tags": '["a", "b"]', "probability": "0.5"}
        ]  # fmt: skip
    read = pacsv.read_csv(tmp_path / "s.csv")
    assert read.column("ts").type == pa.timestamp("s", "UTC") and read.column("ts")[0].as_py() == at


def test_rows_some_of_which_lack_their_label_are_scored_and_said_unmeasured(capsys) -> None:

    from nas.cli.predict import print_measured
    from nas.data.labels import LabelRule, raw_labels
    from nas.service.scoring import Measured

    label = LabelRule("like", "rating", at_least=4)
    labels = raw_labels([{"rating": 5}, {"rating": 3}, {"item": "a"}], [label])
    print_measured(Measured(unmeasured=labels.unmeasured), 3)
    said = " ".join(capsys.readouterr().out.split())
    assert labels.lacking == (3, "rating") and said == (
        "not measured: row 3 has no 'rating' (every row needs its label)"
    )


def test_text_from_a_trial_or_a_search_prints_as_it_is(tmp_path):
    """Rich markup is off: gloo's errors read "[/__w/...]", which rich took for a closing tag
    (`nas status` of a search with such a failed trial crashed with a traceback), and
    "[red]" in a message is the user's text, not a colour."""
    from nas.service.config import load_config
    from tests.test_search import nas_here, registry_of, write_search

    runs = tmp_path / "runs"
    registry = registry_of(runs)
    registry.create_search(
        "mark-abc123", "mark", load_config(write_search(tmp_path)).to_dict(), None
    )
    gloo = "RuntimeError: [/__w/gloo/pair.cc:537] [127.0.0.1]"  # fits 80 columns
    trial = registry.add_trial("mark-abc123", None, "a" * 16, None)
    registry.finish_trial(trial.id, "failed", error=gloo)
    message = "[red]as written[/red] [/x]"
    registry.update_search("mark-abc123", status="failed", message=message, pid=None)
    for args in (("status", "mark"), ("list",), ("pareto", "mark")):
        done = nas_here(runs, *args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    status = nas_here(runs, "status", "mark").stdout
    assert gloo in status and message in status, status


def test_blocks_listing():
    done = nas("blocks", "--json")
    names = {b["name"] for b in json.loads(done.stdout)}
    assert {"dcnv2", "dot", "fm", "mlp", "self_attention", "embedding", "embedding_bag"} <= names


def test_no_command_prints_help():
    done = nas(fresh=True)
    assert done.returncode == 2 and "train" in done.stdout
    done = nas("data")
    assert done.returncode == 2 and "prepare" in done.stdout and "usage: nas data" in done.stdout


def test_a_reader_that_leaves_early_ends_the_command_quietly() -> None:
    """`nas ... | head`: the reader gone before the command writes (here before it starts).
    It ended in a BrokenPipeError traceback; now quietly, as a Unix tool, with the status of
    a process killed by SIGPIPE."""
    import signal

    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: each write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "nas.cli", "blocks", "--json"],
            stdout=writer, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120,
        )  # fmt: skip
    finally:
        os.close(writer)
    assert done.returncode == 128 + signal.SIGPIPE and done.stderr == "", done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="Linux's always-full device")
@pytest.mark.parametrize("argv", [["blocks"], ["blocks", "--json"]])
def test_output_that_finds_no_room_is_said_to_be_the_outputs(argv, tmp_path) -> None:
    """`nas ... > file` on a full disk (here /dev/full): the error advised moving the data
    cache or the runs folder to a larger disk, which are not what filled up. It names the
    command's output now, with exit 1 and no traceback."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "nas.cli", *argv], stdout=full, stderr=subprocess.PIPE,
            text=True, cwd=REPO, timeout=120, env=os.environ | {"RECNAS_RUNS_DIR": str(tmp_path)},
        )  # fmt: skip
    said = " ".join(done.stderr.split())
    assert done.returncode == 1, said
    assert said == "error: cannot write the command's output (stdout): No space left on device"


@pytest.mark.parametrize("text", ["0", "-3", "x", "1.5", "9" * 5000])
def test_a_whole_number_flag_refuses_what_is_not_one_at_its_minimum(text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected an integer"):
        whole_number(1)(text)


def test_a_whole_number_flag_takes_its_minimum_and_above():
    assert whole_number(0)("0") == 0 and whole_number(1)("12") == 12


def test_a_table_sent_to_a_pipe_is_never_cut(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["RECNAS_RUNS_DIR"] = str(tmp_path / "a-long-folder-name-for-the-runs" / ("x" * 60))
    done = nas_process.run(["data", "list"], env, REPO, 120)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout, done.stdout
    assert "(--rows, --seed)" in done.stdout  # the last words of the widest description
    assert max(len(line) for line in done.stdout.splitlines()) > 80


@pytest.mark.parametrize(
    "text",
    [
        '[{"a": 1}, {"a": 2}]',
        '{"dataframe_records": [{"a": 1}, {"a": 2}]}',
        '{"instances": [\n  {"a": 1},\n  {"a": 2}\n]}',
        '{"dataframe_split": {"columns": ["a"], "data": [[1], [2]], "index": [0, 1]}}',
        '{"inputs": {"a": [1, 2]}}',
    ],
)
def test_predict_reads_a_json_array_or_mlflows_request_forms(tmp_path, text) -> None:
    from nas.data.row_files import RowFiles

    def read_rows(path):
        return [row for batch in RowFiles(path).batches() for row in batch.rows]

    path = tmp_path / "rows.json"
    path.write_text(text)
    assert read_rows(path) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1, "instances": []}')  # a row that happens to have such a key
    assert read_rows(path) == [{"a": 1, "instances": []}]


@pytest.mark.parametrize(
    "text, words",
    [
        ('{"dataframe_split": {"data": [[1]]}}', '"columns": [names], "data": [[values], ...]'),
        ('{"dataframe_split": {"columns": ["a", "b"], "data": [[1, 2], [3]]}}', "row 2 must be "
         "a list of 2 values (one per column), got [3]"),
        ('{"inputs": {"a": [1, 2], "b": [3]}}', "all of one length; got 'a': 2, 'b': 1"),
        ('{"instances": {"a": 5}}', "got 'a': not a list"),
    ],
)  # fmt: skip
def test_a_request_form_of_the_wrong_shape_is_named(tmp_path, text, words) -> None:
    from nas.core.errors import ConfigError
    from nas.data.row_files import RowFiles

    path = tmp_path / "rows.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(words)):
        list(RowFiles(path).batches())


def test_scored_json_lines_are_valid_json_whatever_the_rows_hold() -> None:
    """Python's JSON reads NaN in a row; RFC 8259 has none: it is written as null."""
    import datetime

    import numpy as np

    from nas.cli.predict import scored_lines
    from nas.data.row_files import RowBatch

    when = datetime.datetime(2026, 12, 6, 9, 0)
    batch = RowBatch(1, _rows=[{"count": float("nan"), "at": when, "ids": [float("inf")]}])
    (line,) = scored_lines(batch, {"probability": np.array([0.5], dtype=np.float32)})
    assert json.loads(line, parse_constant=lambda c: pytest.fail(c)) == {
        "row": {"count": None, "at": "2026-12-06 09:00:00", "ids": [None]},
        "probability": 0.5,
    }


def test_rows_to_score_from_csv_tsv_and_json_lines_as_spreadsheets_write_them(tmp_path) -> None:
    """A byte-order mark (Excel's UTF-8) is skipped; a quote left open or a row with more
    values than the header is refused naming the line; batches number their rows."""
    import bz2
    import gzip

    from nas.core.errors import ConfigError
    from nas.data.row_files import RowFiles

    def rows(name: str, data: bytes, batch: int = 100) -> list:
        path = tmp_path / name
        path.write_bytes(data)
        return [(b.first, b.rows) for b in RowFiles(path).batches(batch)]

    assert rows("a.csv", b'\xef\xbb\xbfsite,n\na,"1"\n"b\nc",\n') == [
        (1, [{"site": "a", "n": "1"}, {"site": "b\nc", "n": ""}])
    ]
    assert rows("a.tsv", b"site\tn\na\t2\nb\n", batch=1) == [
        (1, [{"site": "a", "n": "2"}]),
        (2, [{"site": "b", "n": None}]),
    ]
    assert rows("a.jsonl", b'\xef\xbb\xbf{"a": 1}\n\n{"a": 2}\n') == [(1, [{"a": 1}, {"a": 2}])]
    for name, pack in (("a.jsonl.gz", gzip.compress), ("a.json.bz2", bz2.compress)):  # (kept so)
        lines = b'{"a": 1}\n{"a": 2}\n' if name.endswith("l.gz") else b'[{"a": 1}, {"a": 2}]'
        assert rows(name, pack(lines)) == [(1, [{"a": 1}, {"a": 2}])]
    for name, data, words in [
        ("open.csv", b'site,n\n"a,1\n', "open.csv line 2: unexpected end of data"),
        (
            "wide.csv",
            b"site,n\na,1\nb,2,3\n",
            "wide.csv line 3: 3 values, more than the 2 columns of its header",
        ),
        ("bad.jsonl", b'{"a": 1}\n{"a": \n', "bad.jsonl line 2: not JSON"),
        ("array.jsonl", b'\n[{"a": 1},\n {"a": 2}]', "array.jsonl: holds a JSON array, not JSON"),
        ("latin.csv", b"site\ncaf\xe9\n", "latin.csv line 2: not UTF-8 text"),
        ("rows.txt", b"", "use a .jsonl (JSON lines), .json, .csv, .tsv, .parquet, .orc or .avro"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(words)):
            rows(name, data)


def test_rows_to_score_from_a_folder_of_parts_or_a_glob(tmp_path) -> None:
    """A day's parts as Spark writes them: read in the order of their names, bookkeeping
    files skipped, a column a part lacks as nulls, a widened type as the wider one; parts
    whose columns disagree, or files of several formats, refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nas.core.errors import ConfigError
    from nas.data.row_files import RowFiles

    day = tmp_path / "day"
    (day / "hour=1").mkdir(parents=True)
    pq.write_table(pa.table({"site": ["a", "b"], "n": pa.array([1, 2], pa.int32())}),
                   day / "part-0.parquet")  # fmt: skip
    pq.write_table(pa.table({"n": [3]}), day / "hour=1" / "part-1.parquet")
    (day / "_SUCCESS").write_text("")
    (day / ".part-0.parquet.crc").write_text("x")
    files = RowFiles(day)
    assert [p.relative_to(day).as_posix() for p in files.paths] == [
        "hour=1/part-1.parquet",
        "part-0.parquet",
    ]
    batches = list(files.batches())
    assert [(b.file.name, b.first) for b in batches] == [
        ("part-1.parquet", 1),
        ("part-0.parquet", 1),
    ]
    assert [r for b in batches for r in b.rows] == [  # hour=1/: a column of its file's rows
        {"n": 3, "site": None, "hour": "1"},
        {"n": 1, "site": "a", "hour": None},
        {"n": 2, "site": "b", "hour": None},
    ]
    assert files.total == files.done == 3
    assert len(RowFiles(f"{day}/*.parquet").paths) == 1  # a glob names what it matches
    assert len(RowFiles(f"{day}/**/*.parquet").paths) == 2
    pq.write_table(pa.table({"n": ["three"]}), day / "part-2.parquet")
    with pytest.raises(ConfigError, match=r"part-2.parquet: its columns disagree with those of"):
        RowFiles(day)
    (day / "part-2.parquet").unlink()
    (day / "more.jsonl").write_text('{"n": 4}\n')
    with pytest.raises(ConfigError, match=r"several formats \(.jsonl, .parquet\)"):
        RowFiles(day)
    with pytest.raises(ConfigError, match="no file matches"):
        RowFiles(f"{day}/*.csv")
    (day / "empty").mkdir()
    with pytest.raises(ConfigError, match="is a folder with no .jsonl"):
        RowFiles(day / "empty")


def test_rows_are_grouped_by_a_column_s_values_and_a_row_of_no_group_is_named(tmp_path) -> None:
    """`nas models compare --by`: ids as values are first seen, across batches and a
    Parquet batch's column; a row without a value (or with a list for one) is refused,
    named with its file."""
    import pyarrow as pa

    from nas.core.errors import ConfigError
    from nas.data.row_files import RowBatch
    from nas.service.scoring import RowGroups

    groups = RowGroups("user_id")
    groups.add(RowBatch(1, _rows=[{"user_id": "a"}, {"user_id": 7}, {"user_id": "a"}]))
    groups.add(RowBatch(4, table=pa.table({"user_id": [7, 8], "x": [1, 2]})))
    groups.add(RowBatch(6, _rows=[]))
    assert groups.ids.tolist() == [0, 1, 0, 1, 2] and groups.ids.dtype.kind == "i"
    assert groups.count == 3
    for rows, found in (([{"user_id": "a"}, {}], "no value"), ([{"user_id": ["x"]}], "['x']"),
                        ([{"user_id": ""}], "no value")):  # fmt: skip
        with pytest.raises(ConfigError) as caught:
            groups.add(RowBatch(9, _rows=rows, file=tmp_path / "part-1.jsonl"))
        row = 9 + len(rows) - 1
        assert f"--by: row {row} of {tmp_path / 'part-1.jsonl'} has {found} for 'user_id'" in str(
            caught.value
        )
    assert groups.count == 3


def test_a_comparison_says_what_its_intervals_say(capsys) -> None:
    """`nas models compare`'s table and its line per model: better or worse only where the
    95% interval leaves out zero; unknown where there is no spread or one class."""
    from nas.cli.predict import _difference, _print_compared

    def model(uri, ne=None, auc=None):
        row = {"model_uri": uri, "ne": 0.8, "auc": 0.75, "logloss": 0.5, "rule": "click"}
        if ne is None:
            return row
        return row | {
            "ne_difference": dict(zip(("mean", "low", "high"), ne, strict=True)),
            "auc_difference": dict(zip(("mean", "low", "high"), auc, strict=True)),
        }

    nan = float("nan")
    _print_compared("click", [
        model("models:/m@champion"),
        model("models:/m/2", (-0.002, -0.003, -0.001), (0.001, -0.001, 0.003)),
        model("models:/m/3", (0.004, 0.002, 0.006), (-0.002, -0.003, -0.001)),
        model("models:/m/4", (0.0, nan, nan), (nan, nan, nan)),
    ], 1000, {"by": None})  # fmt: skip
    said = " ".join(capsys.readouterr().out.split())
    assert "label click (click) on 1,000 rows: against models:/m@champion" in said
    _print_compared("click", [model("a"), model("b", (0.0, nan, nan), (0.0,) * 3)], 1000,
                    {"by": "user_id", "groups": 1})  # fmt: skip
    grouped = " ".join(capsys.readouterr().out.split())
    assert "label click (click) on 1,000 rows in 1 group by user_id: against a" in grouped
    assert "b against the first, at 95%: NE unknown (too few groups)" in grouped
    # a cell may wrap in a narrow terminal: its text, as the table is given it
    assert _difference({"mean": -0.002, "low": -0.003, "high": -0.001}) == (
        "-0.0020 (-0.0030, -0.0010)"
    )
    assert "models:/m/2 against the first, at 95%: NE better, AUC within noise" in said
    assert "models:/m/3 against the first, at 95%: NE worse, AUC worse" in said
    assert (
        "models:/m/4 against the first, at 95%: NE unknown (too few rows), AUC unknown (the "
        "rows hold one class)" in said
    )
