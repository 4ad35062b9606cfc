"""A dataset of several labels: one head per label over a shared trunk, each label measured
on its own (``ne:like``...), objectives that name a label, and a retrain, a registered
model and its predictions per label. The labels are learnable and different: clicks follow
the site, likes the item."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from nas.data import prepare_dataset
from tests.data.test_schema_file import by_source, logs, schema_file

ROWS = 4000


def two_label_logs(rows: int = ROWS):
    """Click logs whose click depends on the site and whose like depends on the item."""
    frame = logs(rows=rows, seed=5)
    rng = np.random.default_rng(7)
    site_effect = {"a": 2.0, "b": -2.0, "c": 1.0, "d": -1.0, "e": 0.0}
    item_effect = {f"i{j}": (2.0 if j % 3 == 0 else -1.5) for j in range(30)}
    click = [site_effect.get(s, 0.0) if isinstance(s, str) else 0.0 for s in frame["site"]]
    like = [item_effect[i] for i in frame["item_id"]]
    for name, logit in (("click", click), ("like", like)):
        p = 1 / (1 + np.exp(-np.asarray(logit)))
        frame[name] = (rng.random(rows) < p).astype(np.int64)
    return frame


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The two-label dataset prepared once: (dataset, frame, its folder)."""
    folder = tmp_path_factory.mktemp("two_labels")
    frame = two_label_logs()
    path = schema_file(folder, frame=frame)
    dataset, _ = prepare_dataset(str(path), folder / "cache")
    return dataset, frame, folder


def test_a_model_has_one_head_per_label_over_a_shared_trunk(prepared) -> None:
    from nas.arch.model import build_model
    from nas.arch.spec import ArchSpec
    from nas.data.schema import LABEL, Schema
    from tests.test_search import REPO

    dataset, _, _ = prepared
    schema = dataset.schema
    assert schema.labels == ("click", "like") and schema.heads == 2
    spec = ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json")
    torch.manual_seed(0)
    model = build_model(spec, schema)
    batch = dataset.features("valid")[torch.arange(8)]
    logits = model(*batch.inputs())
    assert logits.shape == (8, 2)
    head = model.top.layers[-1]
    assert head.out_features == 2
    # the same model on one label: the same trunk, one output, the other head's FLOPs less
    one = Schema(tuple(f for f in schema.fields if f.kind != LABEL))
    single = build_model(spec, one)
    assert single(*batch.inputs()).shape == (8,)
    assert model.flops() - single.flops() == 2 * head.in_features
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    single_shapes = {k: v.shape for k, v in single.state_dict().items()}
    last = f"top.layers.{len(model.top.layers) - 1}"
    assert {k for k in shapes if shapes[k] != single_shapes[k]} == {
        f"{last}.weight",
        f"{last}.bias",
    }
    # each head is its own: the click logit does not move the like head's weights
    logits[:, 0].sum().backward()
    assert head.weight.grad[1].abs().sum() == 0 and head.weight.grad[0].abs().sum() > 0


def test_each_labels_figures_are_those_of_the_label_alone() -> None:
    from workers.metrics import binary_metrics

    generator = torch.Generator().manual_seed(0)
    labels = (torch.rand(500, 2, generator=generator) < torch.tensor([0.3, 0.6])).float()
    logits = torch.randn(500, 2, generator=generator) + labels
    groups = {"gauc": np.arange(500) % 17, "gauc_request": np.arange(500) // 5}
    rates = {"click": 0.25, "like": 0.55}
    both = binary_metrics(labels, logits, rates, groups)
    for j, (name, rate) in enumerate(rates.items()):
        alone = binary_metrics(labels[:, j], logits[:, j], rate, groups)
        for key, value in alone.items():
            assert both[f"{key}:{name}"] == value
    for key in ("ne", "auc", "logloss", "gauc", "gauc_request"):
        assert both[key] == pytest.approx((both[f"{key}:click"] + both[f"{key}:like"]) / 2)
    with pytest.raises(ValueError, match="one positive rate each"):
        binary_metrics(labels, logits, 0.3)


def test_training_learns_each_label_and_measures_it_against_its_own_rate(prepared) -> None:
    from nas.arch.spec import ArchSpec
    from tests.test_search import REPO
    from workers.metrics import base_entropy
    from workers.train import TrainConfig
    from workers.trial import SelectBest, evaluate
    from workers.trial_data import TrialData

    dataset, frame, _ = prepared
    split = by_source(dataset, "split")
    data = TrialData.from_prepared(dataset, "valid", mapped=True)
    assert data.train_rates == {
        "click": pytest.approx(frame["click"][split == 0].mean()),
        "like": pytest.approx(frame["like"][split == 0].mean()),
    }
    spec = ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json")
    config = TrainConfig(steps=150, batch_size=128, eval_batch_size=1000, warmup_steps=10)
    select = SelectBest(every_steps=50, rows=400, metric="ne:like")  # best by one label
    result = evaluate(spec, data, config, select=select)
    figures = result.to_dict()
    for name in ("click", "like"):
        rate = data.train_rates[name]
        assert figures[f"ne:{name}"] == pytest.approx(
            figures[f"logloss:{name}"] / base_entropy(rate)
        )
        assert figures[f"auc:{name}"] > 0.65  # each head learned its own signal
        assert figures[f"gauc:{name}"] is not None
    assert figures["ne"] == pytest.approx((figures["ne:click"] + figures["ne:like"]) / 2)
    # the checks measure each label too (a search's rungs and objectives read them)
    assert {"ne:like", "auc:click", "gauc"} <= set(result.checks[0])
    assert result.best_step == min(result.checks, key=lambda c: c["ne:like"])["step"]
    assert math.isfinite(figures["gauc"])


@pytest.mark.parametrize(
    ("objective", "words"),
    [
        ("ne:share", "'ne:share' names label 'share', but dataset 'my_ctr' has labels click"),
        ("flops:click", "only ne, auc, logloss, gauc, gauc_request name a label"),
    ],
)
def test_an_objective_naming_a_label_the_dataset_lacks_exits_2(
    prepared, tmp_path: Path, objective: str, words: str
) -> None:
    from tests.test_search import nas_here

    _, _, folder = prepared
    search = tmp_path / "s.yaml"
    search.write_text(
        f"name: bad\ndataset: {folder / 'my_ctr.yaml'}\nspace: {{name: ctr_stack}}\n"
        f"objectives: ['{objective}', flops]\n"
    )
    runs = tmp_path / "runs"
    done = nas_here(runs, "submit", str(search), RECNAS_CACHE_DIR=str(folder / "cache"))
    assert done.returncode == 2, done.stderr
    assert words in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
    assert not (runs / "registry.db").exists()


def test_a_label_objective_on_a_dataset_of_one_label_says_to_drop_the_label(
    tmp_path: Path,
) -> None:
    from tests.test_search import nas_here

    search = tmp_path / "s.yaml"
    search.write_text(
        "name: bad\ndataset: movielens-100k\nspace: {name: ctr_stack}\n"
        "objectives: ['ne:click', flops]\n"
    )
    runs = tmp_path / "runs"
    done = nas_here(runs, "submit", str(search))
    assert done.returncode == 2, done.stderr
    assert "has one label: write ne" in " ".join(done.stderr.split())
    assert not (runs / "registry.db").exists()


@pytest.mark.slow
def test_a_search_on_one_label_retrains_registers_and_predicts_every_label(
    prepared, tmp_path: Path, monkeypatch
) -> None:
    """`nas submit` with objectives [ne:like, auc:click, flops] under ASHA, `nas retrain`
    ranked by the like head's NE, `nas models register`, `nas predict` per label."""
    from mlflow import MlflowClient

    from nas.core.paths import weights_file
    from nas.service.serving import LoadedModel
    from tests.conftest import runs_with_store
    from tests.test_search import nas, registry_of

    dataset, _, folder = prepared
    runs = runs_with_store(tmp_path)
    monkeypatch.setenv("RECNAS_CACHE_DIR", str(folder / "cache"))  # nas() passes it on
    monkeypatch.setenv("RECNAS_RUNS_DIR", str(runs))
    search = tmp_path / "two.yaml"
    search.write_text(
        f"name: two\ndataset: {folder / 'my_ctr.yaml'}\n"
        "space: {name: ctr_stack, options: {max_depth: 2, embedding_dims: [8]}}\n"
        "objectives: ['ne:like', 'auc:click', flops]\n"
        "budget: {candidates: 3, steps: 60, select_best: {every_steps: 20}}\n"
        "scheduler: {name: asha, options: {grace_steps: 20, reduction_factor: 3}}\n"
        "train: {batch_size: 128}\n"
        "resources: {concurrency: 1, cpus_per_trial: 1}\ninclude_baselines: false\n"
    )
    done = nas(runs, "submit", str(search), "--json")
    assert done.returncode == 0, done.stderr
    (found,) = registry_of(runs).list_searches()
    trials = registry_of(runs).trials(found.id)
    completed = [t for t in trials if t.status == "completed"]
    assert completed
    for t in completed:
        assert t.values == [t.metrics["ne:like"], t.metrics["auc:click"], t.metrics["flops"]]
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    run = client.get_run(completed[0].mlflow_run_id)
    assert run.data.metrics["ne:like"] == completed[0].metrics["ne:like"]
    assert "val_ne:click" in run.data.metrics
    listing = nas(runs, "list").stdout  # its best NE is the named label's, not "-"
    best = min(t.metrics["ne:like"] for t in completed)
    assert f"{best:.4f}" in next(line for line in listing.splitlines() if found.id in line)
    done = nas(
        runs, "retrain", found.id, "--steps", "40", "--seeds", "1",
        "--register", "two-heads", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ranked_by"] == "ne:like" and report["registered"]["alias"] == "champion"
    ranked = [r["ne:like_mean"] for r in report["rows"]]
    assert ranked == sorted(ranked)
    rows = dataset.raw_rows("test", 5)
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    uri = report["registered"]["uri"]
    predicted = nas(runs, "predict", uri, "--input", str(jsonl), "--json")
    assert predicted.returncode == 0, predicted.stderr
    lines = [json.loads(line) for line in predicted.stdout.splitlines()]
    assert all(set(line) == {"row", "probability_click", "probability_like"} for line in lines)
    # what the retrained weights give, head by head
    best = report["rows"][0]
    info_file = tmp_path / "model.json"
    info_file.write_text(
        json.dumps(
            {
                "spec": next(t.spec for t in trials if t.arch_id == best["arch_id"]),
                "schema": dataset.schema.to_list(),
                "raw_form": dataset.raw_form().to_dict(),
            }
        )
    )
    weights = weights_file(report["id"], best["arch_id"], report["registered"]["seed"])
    expected = LoadedModel.from_files(info_file, weights).probabilities(rows)
    for name in ("probability_click", "probability_like"):
        assert [line[name] for line in lines] == pytest.approx(expected[name], abs=1e-6)
    assert expected["probability_click"].tolist() != expected["probability_like"].tolist()
    # MLflow's pyfunc, as `mlflow models serve` calls it, on a request of 50 rows in the
    # signature's frame (lists joined with "|"): by its columns, as its rows score.
    from nas.service.serving import FRAME_COLUMNS_FROM, as_frame, open_model

    pyfunc, _ = open_model(f"sqlite:///{runs / 'mlflow.db'}", uri)
    request = dataset.raw_rows("train", 50)
    assert len(request) >= FRAME_COLUMNS_FROM
    served = pyfunc.predict(as_frame(request, dataset.raw_form()))
    by_rows = LoadedModel.from_files(info_file, weights).probabilities(request)
    for name in ("probability_click", "probability_like"):
        assert served[name].to_numpy() == pytest.approx(by_rows[name], abs=1e-6)
    # The team's own Parquet, labels and all: scored by its columns (``table_features``) as
    # its rows score, each source column kept, each label measured.
    import pyarrow.parquet as pq

    source = folder / "data" / "part-0.parquet"
    scored = tmp_path / "scored.parquet"
    shown = nas(runs, "predict", uri, "--input", str(source), "--out", str(scored), "--json")
    assert shown.returncode == 0, shown.stderr
    table, read = pq.read_table(scored), pq.read_table(source)
    assert table.column_names == read.column_names + ["probability_click", "probability_like"]
    assert table.select(read.column_names).equals(read)
    by_rows = LoadedModel.from_files(info_file, weights).probabilities(read.to_pylist())
    summary = json.loads(shown.stdout)  # with --out: one object, the rows in the file
    assert summary["rows"] == read.num_rows and summary["unmeasured"] is None
    from workers.metrics import binary_metrics

    rates = dict(zip(("click", "like"), dataset.positive_rates("train"), strict=True))
    for label in ("click", "like"):
        p = table.column(f"probability_{label}").to_numpy().copy()
        assert p == pytest.approx(by_rows[f"probability_{label}"], abs=1e-6)
        y = torch.from_numpy(read.column(label).to_numpy().astype(np.float32))
        want = binary_metrics(y, torch.logit(torch.from_numpy(p).double()), rates[label])
        assert summary["measured"][label]["ne"] == pytest.approx(want["ne"], abs=1e-6)
        assert summary["measured"][label]["auc"] == pytest.approx(want["auc"], abs=1e-9)


def test_the_best_weights_are_those_of_the_named_labels_best_check(monkeypatch) -> None:
    """Checks whose mean NE and like NE disagree: select_best keeps the step its metric
    says (the search's first NE objective: here the like head's)."""
    from workers.trial import SelectBest, _Validation

    model = torch.nn.Linear(2, 1)
    for metric, kept in (("ne:like", 50), ("ne", 100)):
        figures = iter([{"ne": 0.9, "ne:like": 0.8}, {"ne": 0.85, "ne:like": 0.9}])
        monkeypatch.setattr(
            _Validation,
            "measure",
            lambda self, m, step, d, c, f=figures: {"step": step, **next(f)},
        )
        select = SelectBest(every_steps=50, rows=4, metric=metric)
        validation = _Validation(torch.zeros(4), {}, 4, 0, select)
        for step in (50, 100):
            validation.check(model, step, None, None)
        assert validation.best["step"] == kept
