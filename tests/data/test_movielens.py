"""MovieLens: the real files, their counts, the split rule, the views, the cache, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nas.core.errors import DataError, NasError
from nas.data import PrepareRequest, load_dataset, movielens, prepare_dataset
from nas.data.movielens import read_recbole
from nas.data.prepared import split_checksum
from nas.data.sources import fetch_wheel, open_file, open_in_wheel

ML100K = "recbole/dataset_example/ml-100k/ml-100k"


def test_movielens_1m_counts(ml1m):
    m = ml1m.manifest
    assert m["rows"] == 1_000_209
    assert (m["users"], m["items"]) == (6040, 3706)
    assert m["split_sizes"] == {"train": 802_553, "valid": 100_273, "test": 97_383}
    assert [f["name"] for f in m["schema"]] == [
        "user",
        "item",
        "gender",
        "age",
        "occupation",
        "zip",
        "zip_prefix",
        "year",
        "hour",
        "weekday",
        "genres",
        "history",
    ]
    sides = {f["name"]: f["side"] for f in m["schema"]}
    assert [n for n, side in sides.items() if side == "candidate"] == ["item", "year", "genres"]
    label = ml1m.array("label")
    assert label.sum() == 575_281  # ratings 4 and 5 (348,971 + 226,310)


def _check_split_rule(ds):
    """Per user, in (timestamp, file order): train rows, then valid, then test; 80/10/10."""
    users, stamps = np.asarray(ds.array("user_key")), np.asarray(ds.array("timestamp"))
    source, split = np.asarray(ds.array("source_row")), np.asarray(ds.array("split"))
    assert np.array_equal(np.sort(source), np.arange(len(source))), "a rating is lost or twice"
    order = np.lexsort((source, stamps, users))
    users, split = users[order], split[order]
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    assert len(starts) == ds.manifest["users"]
    for lo, hi in zip(starts, np.r_[starts[1:], len(users)], strict=True):
        s = split[lo:hi]
        assert (np.diff(s) >= 0).all(), "a later rating is in an earlier split"
        n = hi - lo
        assert (s == 0).sum() == -(-8 * n // 10)
        assert (s <= 1).sum() == -(-9 * n // 10)


def test_split_rule_holds_for_every_user(ml100k):
    _check_split_rule(ml100k)


def test_split_rule_holds_on_movielens_1m(ml1m):
    _check_split_rule(ml1m)


def test_requests_group_one_user_at_one_time(ml100k):
    users, stamps = np.asarray(ml100k.array("user_key")), np.asarray(ml100k.array("timestamp"))
    requests = np.asarray(ml100k.array("request_key"))
    pairs = np.unique(np.stack([users, stamps]), axis=1).shape[1]
    assert len(np.unique(requests)) == pairs == ml100k.manifest["requests"]
    same = np.unique(np.stack([users, stamps, requests]), axis=1).shape[1]
    assert same == pairs, "a request mixes users or times, or one is split in two"


def _table(cache_dir):
    """MovieLens-100k's ratings joined as the reader joins them, indexed by source row."""
    wheel = fetch_wheel("recbole==1.2.1", cache_dir / "downloads")
    tables = read_recbole(lambda s: open_in_wheel(wheel, ML100K + s), "ml-100k")
    return movielens.table(tables).to_pandas()


def test_features_are_consistent_with_the_tables(ml100k, cache_dir):
    train = ml100k.features("train")
    assert len(train) == ml100k.manifest["split_sizes"]["train"]
    schema = ml100k.schema
    cards = [f.cardinality for f in schema.of_kind("categorical")]
    assert (train.categorical >= 0).all() and (train.categorical < torch.tensor(cards)).all()
    assert train.multi_hot.shape[1:] == (1, schema.of_kind("multi_hot")[0].max_len)
    assert (train.multi_hot[:, 0, 0] > 0).all(), "every movie has a genre"
    rows = ml100k.split_rows("train")
    ratings = _table(cache_dir).iloc[ml100k.array("source_row")[rows]]
    assert np.array_equal(train.label.numpy(), (ratings["rating"] >= 4).to_numpy(np.float32))
    recipes = {r["field"]: r for r in ml100k.raw_form().categorical}
    names = [f.name for f in schema.of_kind("categorical")]
    for field in ("hour", "weekday", "user", "item"):
        vocab = {i: v for v, i in recipes[field]["vocab"].items()}
        got = [vocab.get(int(i)) for i in train.categorical[:, names.index(field)]]
        stamps = ratings["timestamp"].to_numpy()
        want = {
            "hour": (stamps // 3600) % 24 + 1,
            "weekday": (stamps // 86400 + 3) % 7 + 1,
            "user": ratings["user_id"].to_numpy(),
            "item": ratings["item_id"].to_numpy(),
        }[field]
        assert got == [str(w) for w in want], field


def test_preparation_is_deterministic_and_reuses_its_cache(fresh_cache, ml100k):
    first, reused = prepare_dataset("movielens-100k", fresh_cache)
    assert not reused
    assert first.manifest["split_checksum"] == ml100k.manifest["split_checksum"]
    assert first.manifest["files"] == ml100k.manifest["files"]  # byte-identical arrays
    again, reused = prepare_dataset("movielens-100k", fresh_cache)
    assert reused and again.manifest["files"] == first.manifest["files"]


def test_a_corrupt_cache_is_rebuilt(fresh_cache):
    first, _ = prepare_dataset("movielens-100k", fresh_cache)
    np.save(first.root / "label.npy", np.zeros(3, dtype=np.int8))
    assert first.problems()
    rebuilt, reused = prepare_dataset("movielens-100k", fresh_cache)
    assert not reused and not rebuilt.problems()


def test_a_damaged_cache_is_named_when_loaded_and_rebuilt_by_prepare(fresh_cache):
    first, _ = prepare_dataset("movielens-100k", fresh_cache)
    path = first.root / "categorical.npy"
    path.write_bytes(path.read_bytes()[:200])  # truncated, as by a full disk
    with pytest.raises(NasError) as caught:
        load_dataset("movielens-100k", fresh_cache)
    assert str(path) in str(caught.value)
    assert "nas data prepare movielens-100k" in str(caught.value)
    from nas.service.doctor import data_check

    check = data_check(fresh_cache)  # `nas doctor` says so too, with the same command
    assert not check.ok and "movielens-100k" in check.found
    assert check.fix == "nas data prepare movielens-100k"
    prepare_dataset("movielens-100k", fresh_cache)
    assert not load_dataset("movielens-100k", fresh_cache).problems()
    assert data_check(fresh_cache).ok


def test_a_file_changed_in_place_is_named_when_loaded(fresh_cache):
    """Bytes changed in place (same size: ids beyond the vocabulary) used to reach training
    as an IndexError; a file whose modification time moved is checked against its checksum
    as the dataset loads. A file only touched still loads."""
    import os

    first, _ = prepare_dataset("movielens-100k", fresh_cache)
    path = first.root / "categorical.npy"
    os.utime(path, ns=(0, 10**18))  # touched: its bytes are as prepared
    assert not load_dataset("movielens-100k", fresh_cache).problems(checksums=False)
    ids = np.load(path, mmap_mode="r+")
    ids[100:200] = 2**30
    ids.flush()
    del ids
    with pytest.raises(NasError, match="categorical.npy does not match its checksum"):
        load_dataset("movielens-100k", fresh_cache)


def test_split_checksum_depends_on_assignment():
    split = np.array([0, 0, 1, 2], dtype=np.int8)
    rows = np.arange(4)
    assert split_checksum(split, rows) != split_checksum(
        np.array([0, 1, 0, 2], dtype=np.int8), rows
    )


def _write_grouplens(folder, ml100k_wheel):
    """The ML-100k tables rewritten in the official GroupLens ML-1M format (ids, '::', latin-1)."""
    tables = read_recbole(lambda s: open_in_wheel(ml100k_wheel, ML100K + s), "ml-100k")
    with open(folder / "users.dat", "w", encoding="latin-1") as f:
        for key, (gender, age, occupation, zipcode) in tables.users.items():
            f.write(f"{key}::{gender}::{age}::{occupation}::{zipcode}\n")
    with open(folder / "movies.dat", "w", encoding="latin-1") as f:
        for key, (year, genres) in tables.items.items():
            suffix = f" ({year})" if year else ""
            f.write(f"{key}::Movie {key}{suffix}::{'|'.join(genres)}\n")
    with open(folder / "ratings.dat", "w", encoding="latin-1") as f:
        for u, i, r, t in zip(
            tables.rating_users, tables.rating_items, tables.ratings, tables.timestamps, strict=True
        ):
            f.write(f"{u}::{i}::{r}::{t}\n")


def test_grouplens_files_give_the_same_dataset(fresh_cache, ml100k, tmp_path):
    folder = tmp_path / "grouplens"
    folder.mkdir()
    _write_grouplens(folder, fetch_wheel("recbole==1.2.1", fresh_cache / "downloads"))
    ds, _ = prepare_dataset("movielens-1m", fresh_cache, PrepareRequest(source=str(folder)))
    assert ds.manifest["source"]["kind"] == "grouplens"
    assert ds.manifest["split_checksum"] == ml100k.manifest["split_checksum"]
    names = ("categorical", "multi_hot", "label", "split", "user_offsets", "request_key")
    for name in (*names, "event_item", "event_action", "history_start", "history_end"):
        assert np.array_equal(ds.array(name), ml100k.array(name)), name


@pytest.mark.parametrize(
    ("file", "content", "words", "line"),
    [
        ("ratings.dat", "1::1::5::978300760\n1::1::5\n", "expected 4", 2),
        ("ratings.dat", "1::1::five::978300760\n", "rating must be a number", 1),
        ("ratings.dat", "1::99::5::978300760\n", "item '99' is not in the items file", 1),
        ("users.dat", "1::F::1::10\n", "expected 5", 1),
    ],
)
def test_malformed_grouplens_files_name_file_and_line(tmp_path, file, content, words, line):
    files = {
        "users.dat": "1::F::1::10::48067\n",
        "movies.dat": "1::Toy Story (1995)::Comedy\n",
        "ratings.dat": "1::1::5::978300760\n",
    }
    files[file] = content
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="latin-1")
    with pytest.raises(DataError) as err:
        prepare_dataset("movielens-1m", tmp_path / "cache", PrepareRequest(source=str(tmp_path)))
    assert err.value.line == line and file in str(err.value.path)
    assert words in str(err.value)
    assert not (tmp_path / "cache" / "movielens-1m").exists(), "a half-written cache was left"


def test_missing_grouplens_file(tmp_path):
    (tmp_path / "users.dat").write_text("1::F::1::10::48067\n")
    with pytest.raises(DataError, match="movies.dat: file not found"):
        prepare_dataset("movielens-1m", tmp_path / "cache", PrepareRequest(source=str(tmp_path)))


def test_load_prepares_on_first_use(fresh_cache):
    ds = load_dataset("movielens-100k", fresh_cache)
    assert ds.manifest["rows"] == 100_000


RECBOLE_FILES = {
    ".user": "user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token\n"
    "1\t24\tM\tx\t85711\n",
    ".item": "item_id:token\trelease_year:token\tclass:token_seq\n1\t1995\tComedy\n",
    ".inter": "user_id:token\titem_id:token\trating:float\ttimestamp:float\n1\t1\t5\t88\n1\t1\t5\n",
}


def _opener(tmp_path, files):
    for suffix, text in files.items():
        (tmp_path / f"ml{suffix}").write_text(text)
    return lambda suffix: open_file(tmp_path / f"ml{suffix}")


def test_malformed_recbole_file_names_member_and_line(tmp_path):
    with pytest.raises(DataError) as err:
        read_recbole(_opener(tmp_path, RECBOLE_FILES), "ml")
    assert err.value.line == 3 and str(err.value.path) == "ml.inter"


def test_recbole_file_without_a_needed_column(tmp_path):
    files = {**RECBOLE_FILES, ".user": "user_id:token\tage:token\n1\t24\n"}
    with pytest.raises(DataError, match="no 'gender' column"):
        read_recbole(_opener(tmp_path, files), "ml")


def test_history_view_is_the_users_earlier_ratings(ml100k, cache_dir):
    """Each row's history: its user's ratings strictly before its timestamp, oldest first,
    the last max_len kept; (item, rating, age > 0) per event; padding all zero."""
    features = ml100k.features("valid")
    max_len = ml100k.schema.history.max_len
    users, stamps = np.asarray(ml100k.array("user_key")), np.asarray(ml100k.array("timestamp"))
    source = np.asarray(ml100k.array("source_row"))
    items = np.asarray(ml100k.array("categorical")[:, 1])
    ratings = _table(cache_dir)["rating"].to_numpy()[source]
    rows = ml100k.split_rows("valid")
    picked = np.random.default_rng(0).choice(len(rows), 200, replace=False)
    history = features[torch.from_numpy(picked)].history.tensor().numpy()
    for out, i in zip(history, picked, strict=True):
        row = rows[i]
        earlier = np.flatnonzero((users == users[row]) & (stamps < stamps[row]))
        earlier = earlier[np.lexsort((source[earlier], stamps[earlier]))][-max_len:]
        n = len(earlier)
        assert (out[:n, 0] == items[earlier]).all() and (out[:n, 1] == ratings[earlier]).all()
        assert (out[:n, 2] == stamps[row] - stamps[earlier]).all() and (out[:n, 2] > 0).all()
        assert (out[n:] == 0).all()
