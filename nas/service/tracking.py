"""MLflow logging: an experiment per search name, a parent run per search, a child run per
candidate. The registry stays the source of truth; MLflow is where people browse.

    job run     a strategy's setup job (supernet, dnas): settings, numbers, the DNAS logits'
                trajectories, the decoded or picked architectures (see ``log_job``)
    child run   params  the flattened spec (embedding_dim, depth, layer0.block, ...)
                tags    arch_id, search_id, strategy, baseline, trial, status
                metrics every objective and measured number (ne, auc, flops, seconds, ...)
                artifact spec.json
    parent run  params  the flattened search config;  artifacts config.json, pareto.json,
                pareto.csv, pareto.png;  metrics hypervolume, best_<objective>, front_size,
                completed, failed (stepped by trials done, so they plot as the search runs)

Logging is idempotent: a child run is looked up by (search_id, trial) before one is created,
so a search killed between an MLflow write and a registry write never logs a trial twice.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from nas.core.errors import NasError
from nas.service.endpoints import store_lock

METRICS_PER_BATCH = 1000  # MLflow's limit per log_batch call


class TrackingError(NasError):
    """The MLflow tracking store cannot be reached or written."""


def _unanswered(reason: str) -> str:
    """A request the server never answered reads, from MLflow, "API request to URL failed
    with exception HTTPConnectionPool(...): Max retries exceeded with url: ... (Caused by
    NewConnectionError(...: [Errno 111] Connection refused))": that, in a few words. Any
    other reason (the server's own error) as it is."""
    if "Max retries exceeded" not in reason:
        return reason
    why = re.search(r"\[Errno -?\d+\] ([^\"')(]+)", reason) or re.search(
        r"(timed out|Connection aborted|Remote end closed connection)", reason
    )
    return "the server did not answer" + (f" ({why.group(1).strip()})" if why else "")


def flatten_spec(spec: dict[str, Any]) -> dict[str, str]:
    """A spec as flat MLflow params: ``layer0.block``, ``top_mlp`` as ``256-128``..."""
    flat = {
        "embedding_dim": str(spec["embedding_dim"]),
        "depth": str(len(spec["interaction"])),
        "top_mlp": _text(spec.get("top_mlp", [])),
        "top_input": str(spec.get("top_input", "last")),
        "bottom_mlp": _text(spec.get("bottom_mlp", [])),
    }
    for i, layer in enumerate(spec["interaction"]):
        for key, value in layer.items():
            flat[f"layer{i}.{key}"] = _text(value)
    return flat


def flatten_config(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten_config(value, f"{name}."))
        else:
            flat[name] = _text(value)
    return flat


def _text(value: Any) -> str:
    if isinstance(value, list):
        return (
            "-".join(str(v) for v in value)
            if all(isinstance(v, int | float) for v in value)
            else json.dumps(value)
        )
    return json.dumps(value) if isinstance(value, dict) else str(value)


class Tracker:
    def __init__(self, uri: str, artifact_root: Path | None):
        from mlflow import MlflowClient

        # After the import: MLflow sets its own loggers up when it is imported.
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        # It logs a database error's traceback, then raises it: ``call`` names it in one line.
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)

        # A tracking server that stops answering fails a search's logging in seconds, not
        # after MLflow's default 7 retries with exponential backoff (minutes of silence).
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        # With a tracking server, MLflow prints "View run ... at: <url>" to stdout for every
        # run it ends: noise in the progress display, and invalid `--json` output.
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
        os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"  # ours show progress
        self.uri = uri
        self.artifact_root = artifact_root  # for a local store; a server chooses its own
        with store_lock(uri):  # a new sqlite store: its schema made by one process at a time
            self.client = self.call("open the store", MlflowClient, tracking_uri=uri)
            self.call("open the store", self.client.search_experiments, max_results=1)

    def call(self, what: str, fn, *args, **kwargs):
        from mlflow.exceptions import MlflowException
        from sqlalchemy.exc import SQLAlchemyError

        try:
            return fn(*args, **kwargs)
        # SQLAlchemy's: a store's database; OSError: its artifacts' folder (a full disk).
        except (MlflowException, SQLAlchemyError, OSError) as err:
            # A database error's message goes on with its SQL statement and parameters.
            reason = str(getattr(err, "message", None) or err).strip().splitlines()[0]
            raise TrackingError(
                f"MLflow at {self.uri}: could not {what}: {_unanswered(reason)}"
            ) from None

    def experiment(self, name: str) -> str:
        """The experiment ``name`` (made if missing), marked as model training: MLflow's UI
        opens an experiment by its ``mlflow.experimentKind`` tag, and without one it may
        guess the GenAI view (traces, prompts) instead of the runs."""
        found = self.call("read the experiment", self.client.get_experiment_by_name, name)
        if found is not None:
            experiment_id = found.experiment_id
            kind = found.tags.get(EXPERIMENT_KIND_TAG)
        else:
            location = str(self.artifact_root / name) if self.artifact_root else None
            experiment_id = self.call(
                "create the experiment", self.client.create_experiment, name, location
            )
            kind = None
        if kind != EXPERIMENT_KIND:
            self.call(
                "mark the experiment",
                self.client.set_experiment_tag,
                experiment_id,
                EXPERIMENT_KIND_TAG,
                EXPERIMENT_KIND,
            )
        return experiment_id

    def start_search(
        self,
        experiment_id: str,
        search_id: str,
        config: dict[str, Any],
        dataset: dict[str, Any] | None = None,
    ) -> str:
        """The parent run of a search: found by its tags if an earlier session made it.
        ``dataset``: the data's figures, logged as ``dataset_profile.json``."""
        existing = self._find(
            experiment_id, f"tags.search_id = '{search_id}' and tags.kind = 'search'"
        )
        if existing is not None:
            return existing
        run = self.call(
            "create the search run",
            self.client.create_run,
            experiment_id,
            run_name=search_id,
            tags={"search_id": search_id, "kind": "search", "strategy": config["strategy"]["name"]},
        )
        run_id = run.info.run_id
        self._log(run_id, params=flatten_config(config))
        self.call("log config.json", self.client.log_dict, run_id, config, "config.json")
        if dataset is not None:
            self.call(
                "log dataset_profile.json",
                self.client.log_dict,
                run_id,
                dataset,
                "dataset_profile.json",
            )
        return run_id

    def _find(self, experiment_id: str, filter_string: str) -> str | None:
        runs = self.call(
            "look up a run", self.client.search_runs, [experiment_id], filter_string=filter_string
        )
        return runs[0].info.run_id if runs else None

    def resume_search(self, run_id: str) -> None:
        self.call("reopen the search run", self.client.update_run, run_id, status="RUNNING")

    def log_trial(
        self, experiment_id: str, parent_id: str, search_id: str, strategy: str, trial
    ) -> str:
        """The child run of ``trial`` (a registry Trial that has finished); its run id."""
        tags = {
            **self._child_tags(parent_id, search_id, trial),
            "arch_id": trial.arch_id,
            "strategy": "baseline" if trial.kind == "baseline" else strategy,
            "baseline": str(trial.kind == "baseline").lower(),
        }
        name = trial.label or f"t{trial.number:03d}-{trial.arch_id[:8]}"
        run_id = self._child_run(experiment_id, search_id, trial, name, tags)
        self._log(run_id, params=flatten_spec(trial.spec))
        self.call("log spec.json", self.client.log_dict, run_id, trial.spec, "spec.json")
        extra = {"error": trial.error[:5000]} if trial.error else {}
        reused = (trial.timings or {}).get("reused_from")
        if reused:  # a baseline's figures from an earlier search's training of it
            extra["reused_from"] = f"{reused['search_id']} trial {reused['trial']}"
        self._log(run_id, metrics=_numbers(trial.metrics), tags={**tags, **extra})
        self._log_stepped(run_id, "rung", (trial.metrics or {}).get("rungs"))
        self._log_stepped(run_id, "val", (trial.metrics or {}).get("checks"))
        plan = (trial.metrics or {}).get("fp8")
        if plan:  # the FP8 probe's plan: its figures, and the whole plan as fp8_plan.json
            sites = plan["sites"]
            figures = {
                "fp8_latency_bf16_us": plan["latency_bf16_us"],
                "fp8_latency_dispatch_us": plan["latency_dispatch_us"],
                "fp8_ne_all_safe": plan["ne_all_safe_fp8"],
                "fp8_sites_unsafe": sum(not s["safe"] for s in sites),
                "fp8_sites_planned": sum(s["precision"] == "fp8" for s in sites),
            }
            self._log(run_id, metrics=figures)
            self.call("log fp8_plan.json", self.client.log_dict, run_id, plan, "fp8_plan.json")
        status = {"completed": "FINISHED", "stopped": "KILLED"}.get(trial.status, "FAILED")
        self.call("close a trial run", self.client.set_terminated, run_id, status)
        return run_id

    def log_job(
        self, experiment_id: str, parent_id: str, search_id: str, trial, result: dict | None
    ) -> str:
        """The child run of a strategy's setup job (kind supernet or dnas): its settings as
        params, its numbers as metrics, the DNAS logits' trajectories as stepped metrics
        (``alpha.<decision>.<choice>``, ``expected_cost``, ``loss``) and as a chart of the
        probabilities over steps (``probabilities.html``), and what it found as artifacts
        (``spec.json`` and ``probabilities.json``; ``picks.json``, ``subnets.csv``)."""
        tags = {**self._child_tags(parent_id, search_id, trial), "job": trial.arch_id}
        run_id = self._child_run(experiment_id, search_id, trial, trial.arch_id, tags)
        settings = (trial.job or {}).get("settings", {})
        extra = {"error": trial.error[:5000]} if trial.error else {}
        self._log(
            run_id,
            params=flatten_config(settings),
            metrics=_numbers(result),
            tags={**tags, **extra},
        )
        result = result or {}
        self._log_trajectory(run_id, result.get("trajectory"))
        if result.get("trajectory"):
            from dashboards.pareto_html import page, probabilities_figure

            html = page(trial.arch_id, probabilities_figure(result["trajectory"], trial.arch_id))
            self.log_text(run_id, html, "probabilities.html")
        if "decoded" in result:
            self.call("log spec.json", self.client.log_dict, run_id, result["decoded"], "spec.json")
            self.call(
                "log probabilities.json",
                self.client.log_dict,
                run_id,
                result["probabilities"],
                "probabilities.json",
            )
        if "picks" in result:
            self.call("log picks.json", self.client.log_dict, run_id, result["picks"], "picks.json")
        if result.get("subnets"):
            self.call(
                "log subnets.csv",
                self.client.log_text,
                run_id,
                _csv(result["subnets"]),
                "subnets.csv",
            )
        status = "FINISHED" if trial.status == "completed" else "FAILED"
        self.call("close a job run", self.client.set_terminated, run_id, status)
        return run_id

    @staticmethod
    def _child_tags(parent_id: str, search_id: str, trial) -> dict[str, str]:
        return {
            "mlflow.parentRunId": parent_id,
            "search_id": search_id,
            "trial": str(trial.number),
            "kind": trial.kind,
            "status": trial.status,
        }

    def _child_run(self, experiment_id: str, search_id: str, trial, name: str, tags) -> str:
        """The child run of ``trial``: the one an earlier session made (found by its tags),
        else a new one. Its params, artifacts and metrics are written by the caller, again
        on a found run: a crash may have come between its creation and those writes."""
        run_id = self._find(
            experiment_id, f"tags.search_id = '{search_id}' and tags.trial = '{trial.number}'"
        )
        if run_id is None:
            run = self.call(
                "create a run", self.client.create_run, experiment_id, run_name=name, tags=tags
            )
            run_id = run.info.run_id
        return run_id

    def _log_stepped(self, run_id: str, prefix: str, figures: list[dict] | None) -> None:
        """A trial's NE, AUC and logloss (each label's too) on the validation subsample as
        it trained, as stepped metrics: ``rung_ne``... at each rung (with
        budget.select_best, the best check's so far), ``val_ne``... at each check of
        budget.select_best (the run's ``ne`` is the whole split's, at the end)."""
        if not figures:
            return
        from mlflow.entities import Metric

        from workers.trial import is_validation_figure

        now = int(time.time() * 1000)
        points = [
            Metric(f"{prefix}_{key}", float(f[key]), now, int(f["step"]))
            for f in figures
            for key in f
            if is_validation_figure(key)
        ]
        for start in range(0, len(points), METRICS_PER_BATCH):
            chunk = points[start : start + METRICS_PER_BATCH]
            self.call(f"log the {prefix} figures", self.client.log_batch, run_id, metrics=chunk)

    def _log_trajectory(self, run_id: str, trajectory: dict | None) -> None:
        if not trajectory:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        points = []
        for i, step in enumerate(trajectory["step"]):
            points.append(Metric("expected_cost", trajectory["expected_cost"][i], now, step))
            points.append(Metric("loss", trajectory["loss"][i], now, step))
            for decision, choices in trajectory["alpha"].items():
                for choice, values in choices.items():
                    points.append(Metric(f"alpha.{decision}.{choice}", values[i], now, step))
        for start in range(0, len(points), METRICS_PER_BATCH):
            chunk = points[start : start + METRICS_PER_BATCH]
            self.call("log a trajectory", self.client.log_batch, run_id, metrics=chunk)

    def log_probe(self, experiment_id: str, spec, report: dict) -> str:
        """An FP8 probe's run: its NE and latency figures, ``probe.json`` and ``probe.csv``."""
        run = self.call(
            "create the probe run",
            self.client.create_run,
            experiment_id,
            run_name=f"fp8-probe {spec.name or spec.arch_id[:12]}",
            tags={"kind": "fp8_probe", "arch_id": spec.arch_id, "dataset": report["dataset"]},
        )
        run_id = run.info.run_id
        keys = ("ne", "ne_all_safe_fp8", "ne_dispatched", "latency_bf16_us", "latency_fp8_us")
        metrics = {k: report[k] for k in (*keys, "latency_dispatch_us")}
        params = {k: str(report[k]) for k in ("target", "batch", "threshold")}
        self._log(run_id, params=params, metrics=metrics)
        self.call("log probe.json", self.client.log_dict, run_id, report, "probe.json")
        table = _csv(report["sites"])
        self.call("log probe.csv", self.client.log_text, run_id, table, "probe.csv")
        self.call("close the probe run", self.client.set_terminated, run_id, "FINISHED")
        return run_id

    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        self._log(run_id, metrics=_numbers(metrics))

    def log_strategy(self, run_id: str, summary: dict) -> None:
        """What the strategy learned from its jobs, as ``strategy.json`` on the search run."""
        if summary:
            self.call("log strategy.json", self.client.log_dict, run_id, summary, "strategy.json")

    def log_front(self, run_id: str, summary, step: int) -> None:
        metrics = {
            "hypervolume": summary.hypervolume,
            "front_size": len(summary.front),
            "completed": summary.counts["completed"],
            "failed": summary.counts["failed"],
            **{f"best_{k}": v for k, v in summary.best.items()},
        }
        self._log(run_id, metrics=metrics, step=step)
        self.call("log pareto.json", self.client.log_dict, run_id, summary.to_dict(), "pareto.json")
        self.call(
            "log pareto.csv", self.client.log_text, run_id, _csv(summary.front_rows()), "pareto.csv"
        )

    def log_figure(self, run_id: str, figure, name: str) -> None:
        self.call(f"log {name}", self.client.log_figure, run_id, figure, name)

    def log_text(self, run_id: str, text: str, name: str) -> None:
        self.call(f"log {name}", self.client.log_text, run_id, text, name)

    def tag_run(self, run_id: str, tags: dict[str, str]) -> None:
        self._log(run_id, tags=tags)

    def log_retrain(self, run_id: str, report: dict[str, Any]) -> None:
        """A retrain's comparison on its run: ``retrain.json``, and per architecture its
        mean test NE (the one it ranks by) and its paired difference from the best baseline
        as metrics."""
        metrics, ranked_by = {}, report.get("ranked_by", "ne")
        for row in report["rows"]:
            key = "".join(c if c.isalnum() or c in "-_." else "_" for c in row["label"])
            metrics[f"{key}.test_{ranked_by}"] = row[f"{ranked_by}_mean"]
            if row["ne_minus_best_baseline"] is not None:
                metrics[f"{key}.ne_minus_best_baseline"] = row["ne_minus_best_baseline"]
        self._log(run_id, metrics=metrics)
        self.call("log retrain.json", self.client.log_dict, run_id, report, "retrain.json")

    def end_search(self, run_id: str, status: str) -> None:
        mlflow_status = {"completed": "FINISHED", "failed": "FAILED"}.get(status, "KILLED")
        self.call("close the search run", self.client.set_terminated, run_id, mlflow_status)

    def _log(self, run_id: str, params=None, metrics=None, tags=None, step: int = 0) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        self.call(
            "log to a run",
            self.client.log_batch,
            run_id,
            metrics=[Metric(k, v, now, step) for k, v in (metrics or {}).items()],
            params=[Param(k, v[:6000]) for k, v in (params or {}).items()],
            tags=[RunTag(k, v) for k, v in (tags or {}).items()],
        )


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"  # MLflow's name for model training


def _numbers(values: dict | None) -> dict[str, float]:
    """The numeric entries of a result, as MLflow metrics."""
    return {
        k: float(v)
        for k, v in (values or {}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def _csv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
