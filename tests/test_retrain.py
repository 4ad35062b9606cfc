"""`nas retrain`: a finished search's picks and baselines, trained again over seeds through
Ray Tune and measured on the test split; bad picks refused; a killed retrain resumes.

Real parts throughout: `nas submit` and `nas retrain` in subprocesses, a local Ray, the
sqlite registry and MLflow store, MovieLens-100k."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow import MlflowClient

from tests import nas_process
from tests.conftest import runs_with_store
from tests.test_search import (
    REPO,
    env_for,
    nas,
    nas_here,
    registry_of,
    start_nas,
    write_search,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, str]:
    """A finished tiny search (4 candidates + 2 baselines, 60 steps): its runs folder, id.
    Once per module: `make test` runs a test file on one worker (xdist's loadfile)."""
    folder = tmp_path_factory.mktemp("searched")
    runs = runs_with_store(folder)
    done = nas(runs, "submit", str(write_search(folder, candidates=4, steps=60)))
    assert done.returncode == 0, done.stderr
    (search,) = registry_of(runs).list_searches()
    return runs, search.id


@pytest.fixture(scope="module")
def retrained(searched) -> tuple[dict, int]:
    """A retrain of two picks and the baselines over two seeds, with DCNv2 (which the
    search did not train) and DLRM (which it did) given as spec files too, its best searched
    pick registered as tiny-ranker@prod: its --json report, and the trial picked by
    number."""
    runs, search_id = searched
    trials = registry_of(runs).trials(search_id)
    searched_trial = next(t for t in trials if t.kind == "searched" and t.status == "completed")
    done = nas(
        runs, "retrain", search_id, "--pick", "knee", "--pick", str(searched_trial.number),
        "--steps", "40", "--seeds", "2", "--select-every", "10",
        "--register", "tiny-ranker", "--alias", "prod", "--json",
        "--baseline", str(SPECS / "dcnv2.json"), "--baseline", str(SPECS / "dlrm.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), searched_trial.number


SPECS = REPO / "examples" / "specs"


def test_a_retrain_trains_every_pick_and_baseline_on_every_seed(searched, retrained) -> None:
    runs, search_id = searched
    registry = registry_of(runs)
    trials = registry.trials(search_id)
    report, picked_number = retrained
    assert report["status"] == "completed" and report["retrain_of"] == search_id
    assert report["split"] == "test" and report["steps"] == 40 and report["seeds"] == 2
    rows = report["rows"]
    labels = [r["label"] for r in rows]
    baselines = {t.label for t in trials if t.is_baseline}
    assert "dcnv2" not in baselines and "dlrm" in baselines  # the search's: dlrm, deepfm
    assert baselines | {"dcnv2"} <= set(labels) and len(labels) == len(set(labels))
    assert next(r for r in rows if r["label"] == "dcnv2")["picked_as"] == ["baseline"]
    assert any("knee" in r["picked_as"] for r in rows)
    assert any(f"trial {picked_number}" in r["picked_as"] for r in rows)
    # A retrain has a table, not a front: its pareto says where each is.
    front = nas_here(runs, "pareto", report["id"])
    assert front.returncode == 2 and f"the search it retrained: nas pareto {search_id}" in " ".join(
        front.stderr.split()
    )
    assert [r["ne_mean"] for r in rows] == sorted(r["ne_mean"] for r in rows)
    best = report["best_baseline"]
    assert best == min((r for r in rows if r["baseline"]), key=lambda r: r["ne_mean"])["label"]
    for r in rows:
        assert r["seeds"] == [0, 1] and r["ne_std"] >= 0 and r["flops"] > 0
        assert (r["ne_minus_best_baseline"] is None) == (r["label"] == best)
    status = json.loads(nas(runs, "status", report["id"], "--json").stdout)
    assert status["status"] == "completed" and status["rows"] == rows
    table = nas_process.run(  # the table, in an 80-column terminal: nothing cut short
        ["status", report["id"]], {**env_for(runs), "COLUMNS": "80"}, REPO, 120
    ).stdout
    assert "…" not in table, table
    assert any(line.rstrip().endswith("on train, 2 seeds") for line in table.splitlines()), table
    for label in (r["label"] for r in rows if r["picked_as"] == ["baseline"]):
        assert any(line.split()[:2] == [label, "baseline"] for line in table.splitlines()), table
    # Showing a retrain reads the registry only: no torch, Ray or MLflow loaded.
    script = (
        f"import sys; from nas.cli import main; code = main(['status', {report['id']!r}]); "
        "print(code, sorted({'torch', 'ray', 'mlflow'} & set(sys.modules)))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], env=env_for(runs), cwd=REPO, capture_output=True, text=True
    )
    assert shown.stdout.splitlines()[-1] == "0 []", shown.stdout + shown.stderr
    # The registry: a retrain of its own, one trial of kind retrain per (architecture, seed).
    retrain = registry.get_search(report["id"])
    assert retrain.config["retrain"]["of"] == search_id and retrain.status == "completed"
    pairs = registry.trials(retrain.id)
    assert len(pairs) == 2 * len(rows) and {t.kind for t in pairs} == {"retrain"}
    assert {t.metrics["split"] for t in pairs} == {"test"}
    for t in pairs:  # each kept its best weights, checked on validation rows every 10 steps
        assert [c["step"] for c in t.metrics["checks"]] == [10, 20, 30, 40]
        best = min(t.metrics["checks"], key=lambda c: c["ne"])
        assert t.metrics["best_step"] == best["step"]
    assert {t.arch_id.rsplit("-s", 1)[0] for t in pairs} == {r["arch_id"] for r in rows}
    assert {(t.job["pick"], t.job["seed"]) for t in pairs} == {
        (i, s) for i in range(len(rows)) for s in range(2)
    }
    by_label = {r["label"]: r for r in rows}
    for t in pairs:  # the report's means are the trials' own figures
        label = t.label.rsplit(" s", 1)[0]
        same = [p.metrics["ne"] for p in pairs if p.label.rsplit(" s", 1)[0] == label]
        assert by_label[label]["ne_mean"] == pytest.approx(sum(same) / len(same))
    # MLflow: the retrain's run, tagged with the search it retrains, one child per pair.
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    parent = client.get_run(retrain.mlflow_run_id)
    assert parent.data.tags["retrain_of"] == search_id
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"retrain.json", "retrain.html"} <= artifacts
    assert parent.info.status == "FINISHED"
    children = client.search_runs(
        [retrain.mlflow_experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    assert len(children) == len(pairs)
    assert {c.data.tags["kind"] for c in children} == {"retrain"}
    # The original search is untouched.
    after = registry.trials(search_id)
    assert [(t.id, t.status, t.values) for t in after] == [
        (t.id, t.status, t.values) for t in trials
    ]


def test_a_registered_model_predicts_loads_in_a_fresh_python_and_exports(
    searched, retrained, tmp_path
):
    runs, search_id = searched
    report, _ = retrained
    registered = report["registered"]
    assert registered["version"] == "1" and registered["alias"] == "prod"
    assert registered["uri"] == "models:/tiny-ranker@prod"
    best_searched = next(r for r in report["rows"] if not r["baseline"])  # rows: best first
    assert registered["arch_id"] == best_searched["arch_id"] and registered["seed"] == 0
    # The registry: the version, its alias and its tags.
    listed = json.loads(nas(runs, "models", "list", "tiny-ranker", "--json").stdout)
    (version,) = listed
    assert version["aliases"] == ["prod"]
    # Registered again (a retry, or a run killed before its alias): no second version; the
    # version that holds it takes the alias.
    again = nas_here(runs, "models", "register", report["id"], "tiny-ranker", "--json")
    assert json.loads(again.stdout) | {"new": True} == registered | {"alias": "champion"} | {
        "uri": "models:/tiny-ranker@champion"
    }
    assert not json.loads(again.stdout)["new"]
    bad = nas_here(runs, "models", "register", report["id"], "bad name!")
    assert bad.returncode == 2 and "error: name: 'bad name!' is not a model name" in bad.stderr
    (version,) = json.loads(nas(runs, "models", "list", "tiny-ranker", "--json").stdout)
    assert sorted(version["aliases"]) == ["champion", "prod"]
    unknown = nas(runs, "models", "list", "no-such-model")
    assert "no registered model named 'no-such-model'" in unknown.stdout, unknown.stdout
    dataset = registry_of(runs).get_search(search_id).config["dataset"]
    from nas.data import load_dataset

    data = load_dataset(dataset)
    assert version["tags"]["search_id"] == search_id and version["tags"]["dataset"] == dataset
    assert version["tags"]["split_checksum"] == data.manifest["split_checksum"]
    assert version["tags"]["arch_id"] == registered["arch_id"]
    # Raw rows of the test split, one with an unknown item, one without a history.
    rows = data.raw_rows("test", 6)
    rows[1]["item_id"] = "an item nobody has seen"
    del rows[2]["history"]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    predicted = nas(runs, "predict", registered["uri"], "--input", str(jsonl), "--json")
    assert predicted.returncode == 0, predicted.stderr
    scores = [json.loads(line)["probability"] for line in predicted.stdout.splitlines()]
    assert len(scores) == 6 and all(0 < p < 1 for p in scores)
    assert len(set(scores)) > 1
    # A CSV of the same rows (every value a string; no history column) scores as JSON does
    # for the rows whose history was absent in both.
    csv_file = tmp_path / "rows.csv"
    columns = [c for c in rows[0] if c != "history"]
    csv_file.write_text(
        ",".join(columns) + "\n"
        + "".join(",".join(f'"{r[c]}"' for c in columns) + "\n" for r in rows)
    )  # fmt: skip
    from_csv = nas(runs, "predict", registered["uri"], "--input", str(csv_file), "--json")
    assert from_csv.returncode == 0, from_csv.stderr
    csv_scores = [json.loads(line)["probability"] for line in from_csv.stdout.splitlines()]
    assert csv_scores[2] == pytest.approx(scores[2], abs=1e-6)
    # More rows than the table shows: the first 20 in it, every one in --out's file; rows
    # that carry their label (MovieLens's: rating >= 4) are measured.
    many = data.raw_rows("test", 25)
    likes = data.label_array()[data.split_rows("test")[:25]]
    for row, like in zip(many, likes, strict=True):
        row["rating"] = 5 if like else 2
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in many))
    scored = tmp_path / "scored" / "rows.parquet"
    shown = nas(runs, "predict", registered["uri"], "--input", str(jsonl), "--out", str(scored))
    assert shown.returncode == 0, shown.stderr
    said = " ".join(shown.stdout.split())
    assert f"the first 20 of 25 rows; every row is in {scored}" in said, said
    written = pq.read_table(scored).to_pylist()
    assert [r["item_id"] for r in written] == [r["item_id"] for r in many]
    assert written[0]["probability"] == pytest.approx(scores[0], abs=1e-6)  # rows[0] is many[0]
    import torch

    from workers.metrics import binary_metrics

    p = torch.tensor([r["probability"] for r in written], dtype=torch.float64)
    want = binary_metrics(
        torch.tensor(likes, dtype=torch.float32), torch.logit(p), data.positive_rate("train")
    )
    assert (
        f"label like (rating >= 4) on these 25 rows: NE {want['ne']:.4f} (against the training "
        f"rate {data.positive_rate('train'):.4f}), AUC {want['auc']:.4f}" in said
    ), said
    # Bad rows: exit 2, the row and the field named, no traceback.
    bad = dict(rows[0], timestamp="noon")
    jsonl.write_text(json.dumps(rows[0]) + "\n" + json.dumps(bad) + "\n")
    refused = nas(runs, "predict", registered["uri"], "--input", str(jsonl))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "row 2: 'timestamp' must be a unix time in seconds" in " ".join(refused.stderr.split())
    # ... and a bad row in a later batch (a folder's second file): --json prints nothing
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "a.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (tmp_path / "parts" / "b.jsonl").write_text(json.dumps(bad) + "\n")
    refused = nas(runs, "predict", registered["uri"], "--input", str(tmp_path / "parts"), "--json")
    assert refused.returncode == 2 and "b.jsonl" in refused.stderr and refused.stdout == ""
    # MLflow's own loader in a fresh Python gives the same scores.
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = (
        "import json, sys, mlflow, pandas as pd\n"
        f"mlflow.set_tracking_uri('sqlite:///{runs / 'mlflow.db'}')\n"
        f"mlflow.set_registry_uri('sqlite:///{runs / 'mlflow.db'}')\n"
        "rows = [json.loads(l) for l in open(sys.argv[1])]\n"
        "for r in rows:\n"  # genres are "|"-joined already; the history goes as JSON
        "    r['history'] = json.dumps(r.get('history', []))\n"
        "model = mlflow.pyfunc.load_model('models:/tiny-ranker@prod')\n"
        "gone = [dict(r, occupation=None if i == 3 else r['occupation']) for i, r in "
        "enumerate(rows)]\n"  # one missing text: pandas' NA in an Arrow-backed frame
        "frames = [pd.DataFrame(rows), pd.DataFrame([dict(r, history=json.loads(r['history'])) "
        "for r in rows]), pd.DataFrame(gone), pd.DataFrame(gone).convert_dtypes(dtype_backend="
        "'pyarrow')]\n"
        "for frame in frames:\n"
        "    print(json.dumps(model.predict(frame)['probability'].tolist()))\n"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", script, str(jsonl)], capture_output=True, text=True, cwd=tmp_path,
        env={**env_for(runs), "PYTHONPATH": str(REPO)}, timeout=300,
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    given, as_lists, gone, gone_arrow = map(json.loads, fresh.stdout.splitlines()[-4:])
    assert given == pytest.approx(scores, abs=1e-6)
    assert as_lists == pytest.approx(scores, abs=1e-6)  # histories sent as lists
    assert gone_arrow == pytest.approx(gone, abs=1e-6) and gone[3] != scores[3]
    # Exports: loaded back, they give the eager model's scores on the same rows.
    from nas.data.raw import RawForm
    from nas.data.schema import Schema

    for fmt, name in (("torch-export", "model.pt2"), ("torchscript", "model.pt")):
        folder = tmp_path / fmt
        exported = nas(runs, "export", registered["uri"], "--format", fmt, "--out", str(folder))
        assert exported.returncode == 0, exported.stderr
        info = json.loads((folder / "recnas_model.json").read_text())
        features = RawForm.from_dict(info["raw_form"]).features(
            rows, Schema.from_list(info["schema"])
        )
        with warnings.catch_warnings():  # torch.jit.load is deprecated; still asked for
            warnings.simplefilter("ignore", DeprecationWarning)
            program = (
                torch.export.load(folder / name).module()
                if fmt == "torch-export"
                else torch.jit.load(str(folder / name))
            )
        inputs = features.inputs()
        meta = json.loads((folder / "export.json").read_text())
        inputs = inputs[: len(meta["inputs"])]
        with torch.no_grad():
            probabilities = torch.sigmoid(program(*inputs)).tolist()
        assert probabilities == pytest.approx(scores, abs=1e-5)
        again = nas_here(runs, "export", registered["uri"], "--format", fmt, "--out", str(folder))
        assert again.returncode == 2 and "exists" in again.stderr


def test_the_test_rows_in_raw_form_give_back_the_test_ne_and_compare_models_on_them(
    searched, retrained, tmp_path, capsys
) -> None:
    """`nas data rows DATASET --split test`, scored by the registered model through its raw
    form (`nas predict`), measures the NE and AUC its retrain measured on the test split's
    ids; `nas models compare` of the model by alias and by version on them (and by user): the
    same figures, differences of nothing."""
    from nas.cli import main

    runs, search_id = searched
    dataset = registry_of(runs).get_search(search_id).config["dataset"]
    rows = tmp_path / "test_rows.jsonl"
    done = nas(runs, "data", "rows", dataset, "--out", str(rows))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert f"test rows of {dataset} in the raw form" in said and "written empty" not in said
    uri = retrained[0]["registered"]["uri"]
    scored = nas(runs, "predict", uri, "--input", str(rows), "--out",
                 str(tmp_path / "scored.parquet"), "--json")  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    measured = json.loads(scored.stdout)["measured"]["like"]
    registered = retrained[0]["registered"]  # seed 0's weights: its own test NE
    trials = registry_of(runs).trials(retrained[0]["id"])
    seed0 = next(t for t in trials if t.arch_id == f"{registered['arch_id']}-s0")
    assert measured["ne"] == pytest.approx(seed0.metrics["ne"], abs=1e-5)
    assert measured["auc"] == pytest.approx(seed0.metrics["auc"], abs=1e-5)
    tags = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}").get_model_version("tiny-ranker", "1")
    assert tags.tags["test_ne"] == f"{seed0.metrics['ne']:.5f}"  # what nas models list shows
    done = nas(runs, "models", "compare", uri, "models:/tiny-ranker/1", "--input", str(rows),
               "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    compared = json.loads(done.stdout)
    assert list(compared["labels"]) == ["like"]
    first, second = compared["labels"]["like"]
    assert [first["model_uri"], second["model_uri"]] == [uri, "models:/tiny-ranker/1"]
    assert first["ne"] == measured["ne"] and first["auc"] == measured["auc"]
    assert second["ne_difference"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    assert second["auc_difference"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    users = {json.loads(line)["user_id"] for line in rows.read_text().splitlines()}
    assert compared["suggested_by"] == {"column": "user_id", "groups": len(users)}
    assert main(["models", "compare", uri, "--input", str(rows)]) == 2
    assert "name two or more models" in capsys.readouterr().err
    # a user's rows drawn together: as many groups as users
    by = ["models", "compare", uri, "models:/tiny-ranker/1", "--input", str(rows), "--by"]
    done = nas(runs, *by, "user_id", "--json")
    assert done.returncode == 0, done.stderr
    grouped = json.loads(done.stdout)
    assert (grouped["by"], grouped["groups"], compared["by"]) == ("user_id", len(users), None)
    assert "suggested_by" not in grouped
    assert grouped["labels"]["like"][1]["ne_difference"] == second["ne_difference"]
    done = nas(runs, *by, "user")  # a field's name, not a column's
    assert done.returncode == 2 and "--by: row 1 of " in done.stderr, done.stderr


def test_a_file_scored_in_batches_is_scored_and_measured_as_a_whole(
    searched, retrained, tmp_path
) -> None:
    """`nas predict` reads and scores a file a batch at a time: the probabilities, the
    figures of the rows' labels and the row a bad value is named at are those of the file
    read at once."""
    import numpy as np

    from nas.data import load_dataset
    from nas.data.raw import RawInputError
    from nas.data.row_files import RowFiles
    from nas.service.scoring import Scoring

    runs, search_id = searched
    uri = retrained[0]["registered"]["uri"]
    data = load_dataset(registry_of(runs).get_search(search_id).config["dataset"])
    rows = data.raw_rows("test", 40)
    likes = data.label_array()[data.split_rows("test")[:40]]
    for row, like in zip(rows, likes, strict=True):
        row["rating"] = 4 if like else 3
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def scored(batch_rows: int):
        scoring = Scoring(f"sqlite:///{runs / 'mlflow.db'}", uri)
        batches = list(RowFiles(path).batches(batch_rows))
        scores = np.concatenate([scoring.score(b)["probability"] for b in batches])
        return len(batches), scores, scoring.measured()

    (one, whole, measured), (seven, parts, measured_parts) = scored(100), scored(7)
    assert (one, seven) == (1, 6) and len(whole) == 40
    assert parts == pytest.approx(whole, abs=1e-6)
    assert measured_parts.figures["like"] == pytest.approx(measured.figures["like"], abs=1e-6)
    rows[22]["timestamp"] = "noon"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        RawInputError, match=f"{path} row 23: 'timestamp' must be a unix time in seconds"
    ):
        scored(7)
    # A folder of parts: one whose rows lack their labels is named with its row.
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:20]))
    unlabelled = [{k: v for k, v in r.items() if k != "rating"} for r in rows[20:22]]
    (parts / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in unlabelled))
    scoring = Scoring(f"sqlite:///{runs / 'mlflow.db'}", uri)
    for batch in RowFiles(parts).batches(7):
        scoring.score(batch)
    assert scoring.measured().unmeasured == f"{parts / 'b.jsonl'} row 1 has no 'rating'"


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--register", "bad name!"], "--register: 'bad name!' is not a model name"),
        (["--register", "ok", "--alias", "latest"], "--alias: 'latest' is not an alias"),
        (["--pick", "999"], "--pick: 999 is not a completed trial; use knee, best, front"),
        (["--pick", "zzzz"], "'zzzz' matches no completed candidate"),
        (["--seeds", "0"], "--seeds: must be between 1 and 100"),
        (["--train-on", "test"], "--train-on: must be one of train, train+valid"),
        (["--steps", "-3"], "--steps: must be a positive integer"),
        (["--steps", "10", "--epochs", "2"], "not allowed with argument"),
        (["--select-every", "-1"], "--select-every: must be 0 or a positive integer"),
        (["--workers", "0"], "--workers: must be an integer from 1 to 256"),
        (["--baseline", "nosuch.json"], "--baseline: no spec file at nosuch.json"),
        (["--baseline", str(REPO / "pyproject.toml")], "pyproject.toml (--baseline, on"),
        (["--workers", "256"], "resources.workers_per_trial: 256 workers x 1 CPUs"),
        (
            ["--select-every", "20", "--train-on", "train+valid"],
            "--train-on: train+valid leaves no validation rows to select the best weights on",
        ),
        (
            ["--select-every", "50", "--steps", "40"],
            "budget.select_best.every_steps: 50 is not below budget.steps (40)",
        ),
    ],
)
def test_bad_retrain_flags_exit_2_and_create_nothing(searched, flags, words) -> None:
    runs, search_id = searched
    before = len(registry_of(runs).list_searches())
    done = nas_here(runs, "retrain", search_id, *flags)
    assert done.returncode == 2, done.stderr
    assert words in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
    assert len(registry_of(runs).list_searches()) == before


def test_a_killed_retrain_resumes_and_trains_each_pair_once(searched) -> None:
    runs, search_id = searched
    process = start_nas(
        runs, "retrain", search_id, "--pick", "0", "--pick", "1", "--no-baselines",
        "--steps", "100", "--seeds", "3", "--register", "resumed-model", start_new_session=True,
    )  # fmt: skip
    registry = registry_of(runs)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            time.sleep(0.5)
            retrains = [s for s in registry.list_searches() if s.config.get("retrain")]
            fresh = [s for s in retrains if s.config["budget"]["steps"] == 100]
            if fresh and sum(t.status == "completed" for t in registry.trials(fresh[0].id)) >= 2:
                break
        else:
            pytest.fail("the retrain did not get going")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
    retrain = fresh[0]
    done = nas(runs, "resume", retrain.id, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "completed"
    pairs = registry.trials(retrain.id)
    assert all(t.status == "completed" for t in pairs)
    assert len(pairs) == len({t.arch_id for t in pairs}) == 3 * len(report["rows"]) == 6
    assert registry.get_search(retrain.id).sessions == 2
    # --register was part of the retrain: the resumed session registers when it completes.
    assert report["registered"]["name"] == "resumed-model" and report["register_error"] is None
    assert report["registered"]["arch_id"] == report["rows"][0]["arch_id"]
