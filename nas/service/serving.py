"""Retrained models as MLflow models: register, list, load, predict on raw rows (scoring
files of rows: ``nas/service/scoring.py``; exporting: ``nas/service/model_export.py``).

A registered recnas model is an MLflow pyfunc model (``RecnasModel``) with two artifacts:

    recnas_model.json   the spec, the dataset's schema and raw form (vocabularies), where it
                        came from (search, retrain, arch_id, seed, split checksum)
    ARCH-sSEED.pt       the trained state dict (the retrain's weights file), read with
                        ``torch.load(weights_only=True)``

Its signature is the dataset's raw form (``nas/data/raw.py``): the columns a serving system
sends, each of any type (``signature``), its input example with "strings" columns as one
string with "|" between values and the history as a JSON string. ``predict`` returns the
click probability of each row (``probability``), or, for a dataset of several labels, one
column per label (``probability_click``...). The model is logged "from code"
(``nas/service/pyfunc_entry.py``), so nothing pickled is
stored; loading it needs recnas installed (the model's code is recnas's ``build_model``).
MLflow's own loaders work:

    mlflow.pyfunc.load_model("models:/recnas-ml1m@champion").predict(df)

We wrap the model as a pyfunc instead of logging it with ``mlflow.pytorch``: what a user
has are raw rows, and the vocabularies that turn them into ids belong to the model.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernels.fp8_linear import Dispatched
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError, NasError, shown
from nas.core.names import NAME_RULE, is_name
from nas.core.paths import weights_file
from nas.data.raw import RawForm
from nas.data.raw_table import rows_table, table_features
from nas.data.row_files import RowBatch, with_fields, with_fields_of, with_list_fields_of
from nas.data.schema import Features, Schema
from workers.fp8_probe import fp8_plan_sites

MODEL_FILE = "recnas_model.json"
ALIAS_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
EXAMPLE_ROWS = 5
PREDICT_BATCH = 4096
# A request of this many rows or more is encoded by column (benchmarks/README.md, "nas
# predict": 1,000 rows 48 -> 10 ms; even at about 40, the rows faster below).
FRAME_COLUMNS_FROM = 40


def check_name(name: str, alias: str, named_by: str = "--register") -> None:
    """A registered model's name and alias as MLflow takes them, or ``ConfigError`` naming
    ``named_by`` (the flag or argument that gave the name)."""
    if not is_name(name):
        raise ConfigError(named_by, f"{shown(name)} is not a model name: use 1-100 {NAME_RULE}")
    if not ALIAS_RE.match(alias) or alias.lower() == "latest" or re.match(r"^v\d+$", alias):
        raise ConfigError(
            "--alias",
            f"{alias!r} is not an alias: use letters, digits, '_' and '-' (up to 64), starting "
            "with a letter or '_'; not 'latest' and not a version like 'v1'",
        )


def _damaged(file: str | Path, err: Exception) -> NasError:
    said = str(err).strip().splitlines()[0][:120] if str(err).strip() else ""
    return NasError(
        f"{file} is not a recnas model's file ({type(err).__name__}"
        f"{': ' + said if said else ''}): missing or changed since the model "
        "was logged; register it again from its retrain (nas models register RETRAIN_ID NAME)"
    )


# --- the model --------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """A recnas model in memory: its network, schema and raw form."""

    model: torch.nn.Module
    schema: Schema
    raw_form: RawForm
    info: dict[str, Any]

    @classmethod
    def from_files(cls, model_file: str | Path, weights_file: str | Path) -> LoadedModel:
        """The model of a recnas model file (spec, schema, raw form) and its weights;
        ``NasError`` naming the file that is missing or damaged."""
        from nas.arch.model import build_model

        # Any error: files changed after the model was logged can fail in any way.
        try:
            info = json.loads(Path(model_file).read_text())
            schema = Schema.from_list(info["schema"])
            model = build_model(ArchSpec.from_dict(info["spec"]), schema)
            raw_form = RawForm.from_dict(info["raw_form"])
        except Exception as err:
            raise _damaged(model_file, err) from None
        try:
            model.load_state_dict(torch.load(weights_file, weights_only=True))
        except Exception as err:
            raise _damaged(weights_file, err) from None
        model.eval()
        return cls(model, schema, raw_form, info)

    @property
    def outputs(self) -> list[str]:
        """The columns ``predict`` returns: ``probability``, or one per label."""
        return output_columns(self.schema)

    @property
    def fp8_sites(self) -> list[str]:
        """The GEMM sites served in FP8: its FP8 dispatch plan's (none: all as trained)."""
        return list(self.info.get("fp8_sites") or ())

    @property
    def precision(self) -> str:
        """How it serves, in words."""
        if self.info.get("precision") != "fp8-dispatch":
            return "as trained"
        sites = self.fp8_sites
        return (
            f"fp8-dispatch: {len(sites)} GEMM sites in row-wise FP8 (e4m3), the rest as "
            f"trained ({', '.join(sites) or 'its FP8 probe found no site safe and faster'})"
        )

    @functools.cached_property
    def network(self) -> torch.nn.Module:
        """The model as it serves: with its FP8 sites as row-wise FP8 GEMMs, if any."""
        if not self.fp8_sites:
            return self.model
        return Dispatched(self.model, self.model, self.fp8_sites).eval()

    def features(self, rows: list[Mapping[str, Any]], first: int = 1) -> Features:
        """Raw rows as the network's input (``RawInputError`` names a bad row and column;
        ``first``: the first row's number). An object's fields are values of their own
        (``user.id``: ``row_files.with_fields_of``), as prepare read them."""
        rows = _with_fields(rows, self.raw_form.columns)
        return self._read(self.raw_form.features(rows, self.schema, first))

    def features_of(self, batch: RowBatch) -> Features:
        """A file's batch of rows as the network's input: by its columns (``table_features``;
        text rows made a table first) where they read plainly, else row by row."""
        table = batch.table
        if table is None:
            table = rows_table(self.raw_form, _with_fields(batch.rows, self.raw_form.columns))
        return self._by_columns(table, lambda: self.features(batch.rows, batch.first))

    def _by_columns(self, table, by_rows) -> Features:
        """``table`` (None: none to read) encoded by its columns where they read plainly
        (an object's fields as columns of their own: ``row_files.with_fields``), else
        ``by_rows()``: the rows, which also name a bad row."""
        table = None if table is None else with_fields(table, self.raw_form.columns)
        features = None if table is None else table_features(self.raw_form, table, self.schema)
        return self._read(features) if features is not None else by_rows()

    def _read(self, features: Features) -> Features:
        return features if self.model.reads_history else features.without_history()

    def probabilities(self, rows: list[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        """Each output column (``outputs``) over raw ``rows``."""
        return self.scored(self.features(rows))

    def frame_probabilities(self, frame) -> dict[str, np.ndarray]:
        """Each output column over a pandas DataFrame of raw rows (a request MLflow serves):
        by its columns where they read plainly, else (and below ``FRAME_COLUMNS_FROM`` rows,
        where Arrow's fixed cost is more than the rows') row by row."""
        import pyarrow as pa

        table = None
        if len(frame) >= FRAME_COLUMNS_FROM:
            # Arrow refuses an object column of mixed types: the rows decide
            with contextlib.suppress(pa.ArrowException, OverflowError, TypeError, ValueError):
                table = pa.Table.from_pandas(frame, preserve_index=False)
        records = frame.to_dict  # the rows, only if the columns cannot be read
        return self.scored(self._by_columns(table, lambda: self.features(records("records"))))

    @torch.no_grad()
    def scored(self, features: Features) -> dict[str, np.ndarray]:
        """Each output column (``outputs``) over ``features``."""
        out = [
            torch.sigmoid(self.network(*features[i : i + PREDICT_BATCH].inputs()).float())
            for i in range(0, len(features), PREDICT_BATCH)
        ]
        heads = len(self.outputs)
        values = torch.cat(out).numpy() if out else np.zeros((0, heads), dtype=np.float32)
        values = values.reshape(len(features), heads)
        return {name: values[:, j] for j, name in enumerate(self.outputs)}


def _with_fields(rows: list[Any], columns: list[str]) -> list[Any]:
    """Rows with each object value's fields as values of their own (``with_fields_of``),
    and each of ``columns`` that is a field of a list of objects as a list of its own
    (``with_list_fields_of``); a row that is not an object as it is (the reader names it)."""
    return [
        with_list_fields_of(with_fields_of(row), columns) if isinstance(row, dict) else row
        for row in rows
    ]


def output_columns(schema: Schema) -> list[str]:
    """What a model of ``schema`` predicts per row: ``probability``, or for several labels
    one column each, ``probability_<label>``."""
    return [f"probability_{label}" for label in schema.labels] or ["probability"]


def pyfunc_model():
    """A ``RecnasModel``: its class is made on first use, so that importing this module does
    not import MLflow (the CLI imports it for every ``nas`` command)."""
    import mlflow.pyfunc

    class RecnasModel(mlflow.pyfunc.PythonModel):
        """A retrained recnas model that scores raw rows (see the module docstring)."""

        # MLflow would validate inputs against predict's type hints (and warns without
        # any): the logged signature and the raw form's own checks do that here.
        _skip_type_hint_validation = True

        def load_context(self, context) -> None:
            self.loaded = LoadedModel.from_files(
                context.artifacts["model"], context.artifacts["weights"]
            )

        def predict(self, context, model_input, params=None):
            import pandas as pd

            return pd.DataFrame(self.loaded.frame_probabilities(model_input))

    return RecnasModel()


def signature(form: RawForm, outputs: list[str]):
    """The raw form's columns, each required or not, of any type: MLflow's conversion to a
    column type loses what prepare reads (a pandas frame's missing text read with Arrow
    dtypes becomes the text "<NA>"; a nullable integer column of a dense field is refused;
    a history sent as lists is refused). The raw form checks each value as prepare read it."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec
    from mlflow.types import Schema as MlflowSchema
    from mlflow.types.schema import AnyType

    inputs = MlflowSchema(
        [ColSpec(AnyType(), name, required=not c["optional"]) for name, c in form.columns.items()]
    )
    return ModelSignature(inputs, MlflowSchema([ColSpec("double", name) for name in outputs]))


def as_frame(rows: list[Mapping[str, Any]], form: RawForm):
    """Raw rows as the DataFrame the signature describes, every column typed: lists joined
    with "|", histories as JSON (``RawInputError`` names a bad row and column)."""
    import pandas as pd

    records = form.typed(rows)
    for record in records:
        for name, column in form.columns.items():
            if column["type"] == "strings":
                record[name] = "|".join(record[name])
            elif column["type"] == "events":
                record[name] = json.dumps(record[name])
    frame = pd.DataFrame.from_records(records, columns=list(form.columns))
    integers = [n for n, c in form.columns.items() if c["type"] == "integer"]
    return frame.astype({n: "int64" for n in integers})


# --- registering a retrain's model ----------------------------------------------------------


@dataclass(frozen=True)
class Registered:
    name: str
    version: str
    alias: str
    arch_id: str
    seed: int
    run_id: str
    uri: str
    new: bool = True  # False: a version of ``name`` held this model already (alias moved)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def register_retrain(registry, search, name: str, alias: str = "champion") -> Registered:
    """Log the best retrained searched architecture of retrain ``search`` (lowest mean test
    NE; its lowest completed seed) as an MLflow model on the retrain's parent run, register
    it as a new version of ``name`` with its tags, and point ``alias`` at that version. A
    version of ``name`` that holds this model already (the same retrain, architecture and
    seed: registered before, or by a run killed before it set the alias) gets the alias
    instead: registering twice makes no second version."""
    from nas.data import load_dataset
    from nas.service.config import validate_config
    from nas.service.plan import tracking_store
    from nas.service.retrain_report import retrain_report

    check_name(name, alias, "name")
    config = validate_config(search.config, f"search {search.id}")
    if config.retrain is None:
        raise NasError(f"{search.id} is a search, not a retrain; run nas retrain {search.id} first")
    if search.status != "completed":
        raise NasError(f"retrain {search.id} is {search.status}; register it once it completes")
    trials = registry.trials(search.id)
    report = retrain_report(config, trials)
    rows = [r for r in report.rows if not r.baseline] or report.rows
    if not rows:
        raise NasError(f"retrain {search.id} has no completed model to register")
    best, seed = rows[0], rows[0].seeds[0]
    weights = weights_file(search.id, best.arch_id, seed)
    if not weights.exists():
        raise NasError(
            f"{weights} is missing: the retrain's weights are kept under the runs folder "
            "(RECNAS_RUNS_DIR) it ran with"
        )
    uri, _ = tracking_store(config)
    held = _held(uri, name, alias, search, best.arch_id, seed)
    if held is not None:  # before the dataset is loaded: nothing to log
        return held
    dataset = load_dataset(config.dataset)
    spec = next(p.spec for p in config.retrain.picks if _arch_id(p.spec) == best.arch_id)
    info = {
        "spec": spec,
        "schema": dataset.schema.to_list(),
        "raw_form": dataset.raw_form().to_dict(),
        "dataset": dataset.name,
        "split_checksum": dataset.manifest["split_checksum"],
        "arch_id": best.arch_id,
        "label": best.label,
        "seed": seed,
        "search_id": config.retrain.of,
        "retrain_id": search.id,
        "steps": config.budget.steps,
        "test_ne": best.metrics[report.ranked_by][0],
        # how raw rows carry the labels, and their training rates: predict measures rows
        # that carry them (a cache prepared before label_columns were recorded: it cannot)
        "labels": dataset.manifest.get("label_columns"),
        "keys": dataset.manifest.get("keys", {}),  # a user's column: compare suggests --by
        # CSV without a header: its columns, by which predict reads such a file
        "csv_columns": dataset.manifest.get("csv_columns"),
        "csv_encoding": dataset.manifest.get("csv_encoding"),  # (None: UTF-8)
        "csv_delimiter": dataset.manifest.get("csv_delimiter"),  # (None: ",")
        "csv_decimal": dataset.manifest.get("csv_decimal"),  # (None: ".")
        "csv_thousands": dataset.manifest.get("csv_thousands"),  # (None: none)
        "csv_quoting": dataset.manifest.get("csv_quoting", True),
        "csv_escape": dataset.manifest.get("csv_escape"),  # (None: none)
        "train_rates": dict(zip(dataset.label_names, dataset.positive_rates("train"), strict=True)),
    }
    trial = next((t for t in trials if t.arch_id == f"{best.arch_id}-s{seed}"), None)
    sites = fp8_plan_sites(trial.metrics if trial is not None else None)
    if sites is not None:  # a search priced in fp8-dispatch: the model serves its plan
        info |= {"precision": "fp8-dispatch", "fp8_sites": sites}
    keys = ("arch_id", "search_id", "retrain_id", "dataset", "split_checksum", "seed")
    tags = {k: str(info[k]) for k in keys} | {"test_ne_mean": f"{info['test_ne']:.5f}"}
    if trial is not None and report.ranked_by in trial.metrics:  # these weights' own
        tags["test_ne"] = f"{trial.metrics[report.ranked_by]:.5f}"
    return _log_and_register(uri, dataset, search, info, weights, name, alias, tags)


def _arch_id(spec: dict) -> str:
    return ArchSpec.from_dict(spec).arch_id


def _store(uri: str):
    """The MLflow store at ``uri`` (checked; MLflow's loggers quietened) as a ``Tracker``,
    and the store MLflow's own functions (``log_model``, ``load_model``) use from now on."""
    import mlflow

    from nas.service.tracking import Tracker

    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)  # before the client: its registry is the same store
    return Tracker(uri, None)


def _log_and_register(uri, dataset, search, info, weights: Path, name, alias, tags) -> Registered:
    from mlflow.exceptions import MlflowException

    client = _store(uri).client
    form = RawForm.from_dict(info["raw_form"])
    with tempfile.TemporaryDirectory() as tmp:
        model_file = Path(tmp) / MODEL_FILE
        model_file.write_text(json.dumps(info))
        LoadedModel.from_files(model_file, weights)  # it loads, before anything is logged
        try:
            return _log(client, search, model_file, weights, form, dataset, name, alias, tags)
        except MlflowException as err:
            raise NasError(f"MLflow at {uri}: could not register {name}: {err.message}") from None


def _log(client, search, model_file, weights, form, dataset, name, alias, tags) -> Registered:
    import mlflow

    previous = client.get_run(search.mlflow_run_id).info.status
    with mlflow.start_run(run_id=search.mlflow_run_id):
        logged = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(Path(__file__).with_name("pyfunc_entry.py")),
            artifacts={"model": str(model_file), "weights": str(weights)},
            signature=signature(form, output_columns(dataset.schema)),
            input_example=as_frame(dataset.raw_rows("test", EXAMPLE_ROWS), form),
            pip_requirements=_requirements(),
        )
    client.set_terminated(search.mlflow_run_id, previous)
    # The client's calls, not mlflow.register_model, which prints to stderr as it goes.
    if not client.search_registered_models(f"name = '{name}'"):
        client.create_registered_model(name, description="recnas retrained architectures")
    version = client.create_model_version(name, logged.model_uri, search.mlflow_run_id, tags)
    client.set_registered_model_alias(name, alias, version.version)
    return Registered(
        name,
        str(version.version),
        alias,
        tags["arch_id"],
        int(tags["seed"]),
        search.mlflow_run_id,
        f"models:/{name}@{alias}",
    )


def _held(uri: str, name: str, alias: str, search, arch_id: str, seed: int) -> Registered | None:
    """The version of registered model ``name`` that holds this retrain's model (its
    retrain, architecture and seed tags) already, ``alias`` moved to it; None if none does."""
    from mlflow.exceptions import MlflowException

    client = _store(uri).client
    same = {"retrain_id": search.id, "arch_id": arch_id, "seed": str(seed)}
    try:
        held = [
            int(found.version)
            for found in client.search_model_versions(f"name = '{name}'")
            if all(found.tags.get(k) == value for k, value in same.items())
        ]
        if not held:
            return None
        version = str(max(held))
        client.set_registered_model_alias(name, alias, version)
    except MlflowException as err:
        raise NasError(f"MLflow at {uri}: could not register {name}: {err.message}") from None
    where = f"models:/{name}@{alias}"
    return Registered(name, version, alias, arch_id, seed, search.mlflow_run_id, where, new=False)


def _requirements() -> list[str]:
    import mlflow
    import pandas

    from nas import __version__

    return [
        f"torch=={torch.__version__.split('+')[0]}",
        f"mlflow=={mlflow.__version__}",
        f"pandas=={pandas.__version__}",
        f"recnas=={__version__}",
    ]


# --- using registered models ----------------------------------------------------------------


def open_model(tracking_uri: str, model_uri: str):
    """The pyfunc model at ``model_uri`` and its ``LoadedModel``; ``NasError`` if there is
    no such model, or it is not a recnas model."""
    import mlflow
    from mlflow.exceptions import MlflowException

    _store(tracking_uri)
    try:
        pyfunc = mlflow.pyfunc.load_model(model_uri)
    except (MlflowException, OSError) as err:
        text = err.message if isinstance(err, MlflowException) else str(err)
        raise NasError(
            f"cannot load {model_uri} from {tracking_uri}: {text.splitlines()[0]} "
            "(see the registered versions with: nas models list)"
        ) from None
    inner = pyfunc.unwrap_python_model()
    if not isinstance(getattr(inner, "loaded", None), LoadedModel):
        raise NasError(f"{model_uri} is not a recnas model")
    return pyfunc, inner.loaded


def list_versions(tracking_uri: str, name: str | None) -> list[dict[str, Any]]:
    """Registered versions (of ``name``, or all), newest first within each model."""
    from datetime import UTC, datetime

    tracker = _store(tracking_uri)
    client = tracker.client
    query = f"name = '{name}'" if name else ""
    if name and not is_name(name):
        raise ConfigError("name", f"{shown(name)} is not a registered model name")
    found = tracker.call("list model versions", client.search_model_versions, query)
    aliases: dict[tuple[str, str], list[str]] = {}  # a version's own record may not list them
    for model_name in sorted({v.name for v in found}):
        model = tracker.call("read a registered model", client.get_registered_model, model_name)
        for alias, version in model.aliases.items():
            aliases.setdefault((model_name, str(version)), []).append(alias)
    rows = []
    for v in sorted(found, key=lambda v: (v.name, -int(v.version))):
        created = datetime.fromtimestamp(v.creation_timestamp / 1000, UTC)
        rows.append(
            {
                "name": v.name,
                "version": str(v.version),
                "aliases": sorted(aliases.get((v.name, str(v.version)), [])),
                "tags": dict(v.tags),
                "run_id": v.run_id,
                "source": v.source,
                "created": created.strftime("%Y-%m-%d %H:%M"),
            }
        )
    return rows
