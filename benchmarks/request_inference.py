"""Request-oriented inference vs per-candidate scoring, at N candidates per request.

Method: a model is built from each spec on the MovieLens-1M schema (weights as initialised:
speed does not depend on them). Requests are validation rows (user, context, history);
candidates are other rows' items (item, year, genres). For N in 1, 10, 100, 1000 each timed
call scores about 1,000 candidates (1000 / N requests):

- per candidate: every candidate row carries its own copy of the request's features and
  history, and ``model(...)`` scores the rows (what a plain ranking model does);
- request-oriented: ``model.score_requests(requests, candidates, owner)`` computes the
  request side once per request.

Both run under ``torch.inference_mode`` on the same threads; the figure is candidates scored
per second (best of ``--repeats`` timed calls after a warm-up), and the two paths' scores
are compared. The reference in the same run is a model without GLM layers, where the
request side is only the embeddings and the ratio should sit near 1. The analytic ratio is
FLOPs per candidate over FLOPs per candidate when the request side is shared
(``flops_per_request(N) / N``).

    .venv/bin/python benchmarks/request_inference.py [--specs a.json ...] [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from nas.arch.model import CandidateInputs, RequestInputs, build_model
from nas.arch.spec import ArchSpec
from nas.data import load_dataset

MODERN = Path(__file__).resolve().parent.parent / "examples" / "specs" / "modern"
COUNTS = (1, 10, 100, 1000)
PER_CALL = 1000  # candidates per timed call


def per_candidate_rows(model, request: RequestInputs, candidates: CandidateInputs, owner):
    """Full per-candidate input rows: the request's columns repeated beside each candidate's."""
    rows = len(owner)
    cat, bags = model.columns["categorical"], model.columns["multi_hot"]
    categorical = torch.zeros(rows, len(cat["request"]) + len(cat["candidate"]), dtype=torch.long)
    categorical[:, cat["request"]] = request.categorical[owner]
    categorical[:, cat["candidate"]] = candidates.categorical
    width = candidates.multi_hot.shape[2]
    multi_hot = torch.zeros(
        rows, len(bags["request"]) + len(bags["candidate"]), width, dtype=torch.long
    )
    multi_hot[:, bags["request"]] = request.multi_hot[owner]
    multi_hot[:, bags["candidate"]] = candidates.multi_hot
    history = None if request.history is None else request.history[owner]
    return categorical, multi_hot, candidates.dense, history


def best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--specs",
        nargs="*",
        type=Path,
        default=[MODERN / "wukong.json", MODERN / "glm_wukong.json", MODERN / "rocs.json"],
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    console = Console(width=100)
    dataset = load_dataset("movielens-1m")
    valid = dataset.features("valid")
    generator = torch.Generator().manual_seed(0)
    table = Table(
        title=f"MovieLens-1M schema: candidates scored per second, {args.threads} threads. "
        "per-request = request side once per request; FLOPs = the analytic speed-up",
        title_justify="left",
    )
    for column in (
        "spec",
        "N",
        "per-candidate/s",
        "per-request/s",
        "speed-up",
        "FLOPs",
        "max|diff|",
    ):
        table.add_column(column, justify="left" if column == "spec" else "right")
    for path in args.specs:
        spec = ArchSpec.load(path)
        torch.manual_seed(0)
        model = build_model(spec, dataset.schema).eval()
        for n in COUNTS:
            num_requests = max(1, PER_CALL // n)
            picks = torch.randperm(len(valid), generator=generator)
            requests = valid[picks[:num_requests]]
            pool = valid[picks[num_requests : num_requests + num_requests * n]]
            request, _ = model.split_inputs(*requests.inputs())
            _, candidates = model.split_inputs(*pool.inputs())
            owner = torch.arange(num_requests).repeat_interleave(n)
            rows = per_candidate_rows(model, request, candidates, owner)
            with torch.inference_mode():
                shared = model.score_requests(request, candidates, owner)
                plain = model(*rows)
                slow = best_seconds(lambda m=model, x=rows: m(*x), args.repeats)
                fast = best_seconds(
                    lambda m=model, r=request, c=candidates, o=owner: m.score_requests(r, c, o),
                    args.repeats,
                )
            count = len(owner)
            flops_ratio = model.flops() * n / model.flops_per_request(n)
            table.add_row(
                spec.name or path.stem,
                str(n),
                f"{count / slow:,.0f}",
                f"{count / fast:,.0f}",
                f"{slow / fast:.2f}x",
                f"{flops_ratio:.2f}x",
                f"{(shared - plain).abs().max().item():.1e}",
            )
        table.add_section()
    console.print(table)


if __name__ == "__main__":
    main()
