"""How well a short training ranks architectures the way a full one does.

    python benchmarks/fidelity.py [--archs 20] [--steps 400 800 2000 4000]
        [--select-every N] [--also-seed S] [--fresh]

Draws ``--archs`` architectures of ``ctr_stack`` (the options of examples/searches/
ctr_quick.yaml, seed 0) and trains each on MovieLens-1M at every step budget in
``--steps``, each budget a training of its own (warm-up and cosine decay to that budget, as a
search without a scheduler trains at ``budget.steps``). The longest training also measures
NE at the shorter budgets' step counts as it goes: what ASHA sees at its rungs, mid-way
through a full-budget schedule. With ``--select-every N`` each training keeps the weights
of its best check (every N steps, on 50,000 validation rows), as a search with
``budget.select_best`` does: its NE is the kept weights', and the longest training's
checkpoints are its best check so far (what ASHA's rungs see then).

It prints, for each shorter budget against each longer one, the Kendall tau between their
NE rankings, both for separate trainings and for the checkpoints of the longest one, and how
many of the longer budget's best five the shorter keeps in its own best five; how many
architectures end worse at the longest budget than at the one before (overfitting past an
epoch); then every architecture's NE at every budget. NE is on the whole validation split.

With ``--also-seed S`` the architectures are also trained at the longest budget from training
seed ``S``: the Kendall tau between the two seeds' rankings is the ceiling of any ranking of
this space on this data (no estimate can agree with full training better than full training
agrees with itself), printed beside the others.

Results are kept, one line per training, in ``--out`` (default nas-runs/fidelity/
results.jsonl); a second run trains only what is missing (``--fresh`` starts over).
Trainings run two at a time, one thread each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SPACE_OPTIONS = {"embedding_dims": [8, 16, 32], "max_depth": 2}  # examples/searches/ctr_quick
BATCH = 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", type=int, default=20, help="architectures to rank")
    parser.add_argument("--steps", type=int, nargs="+", default=[400, 800, 2000, 4000])
    parser.add_argument("--dataset", default="movielens-1m")
    parser.add_argument("--seed", type=int, default=0, help="draws and training")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "nas-runs/fidelity/results.jsonl")
    parser.add_argument("--fresh", action="store_true", help="forget kept results")
    parser.add_argument(
        "--select-every", type=int, default=0, help="keep each training's best check (0: last)"
    )
    parser.add_argument(
        "--also-seed", type=int, help="also train at the longest budget from this seed"
    )
    args = parser.parse_args()
    if args.archs < 3 or len(args.steps) < 2 or min(args.steps) < 1:
        parser.error("needs at least 3 architectures and 2 positive step budgets")
    if args.select_every < 0 or args.select_every >= min(args.steps):
        parser.error("--select-every must be 0 (off) or below the shortest budget")
    steps = sorted(set(args.steps))
    specs = draw(args.archs, args.dataset, args.seed)
    kept = load(args.out, args.fresh)
    jobs = [
        (spec.to_dict(), s, args.seed)
        for spec in specs
        for s in steps
        if (spec.arch_id, s, args.seed, args.select_every) not in kept
    ]
    if args.also_seed is not None:
        jobs += [
            (spec.to_dict(), steps[-1], args.also_seed)
            for spec in specs
            if (spec.arch_id, steps[-1], args.also_seed, args.select_every) not in kept
        ]
    jobs.sort(key=lambda job: -job[1])  # the longest first: the pool ends on short ones
    print(
        f"fidelity: {len(specs)} ctr_stack architectures on {args.dataset}, budgets {steps} "
        f"steps x {BATCH} rows, {args.workers} at a time, "
        + (f"best check every {args.select_every} steps" if args.select_every else "last step")
        + f"; {len(jobs)} trainings to run, "
        f"{len(specs) * (len(steps) + (args.also_seed is not None)) - len(jobs)} kept in "
        f"{args.out}",
        flush=True,
    )
    run(jobs, steps, args, kept)
    from nas.data import load_dataset

    rows = len(load_dataset(args.dataset).split_rows("train"))
    report(specs, steps, (args.seed, args.select_every), kept, rows)
    if args.also_seed is not None:
        ceiling(specs, steps[-1], args, kept)
    return 0


def draw(count: int, dataset: str, seed: int):
    import numpy as np

    from nas.data import load_dataset
    from search_spaces import SpaceInputs, create_space

    schema = load_dataset(dataset).schema
    space = create_space("ctr_stack", SPACE_OPTIONS, SpaceInputs.of(schema))
    rng, specs, seen = np.random.default_rng(seed), [], set()
    while len(specs) < count:
        spec = space.sample(rng)
        if spec.arch_id not in seen:
            seen.add(spec.arch_id)
            specs.append(spec)
    return specs


def load(path: Path, fresh: bool) -> dict:
    if fresh and path.exists():
        path.unlink()
    kept = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            kept[(row["arch_id"], row["steps"], row["seed"], row.get("select_every", 0))] = row
    return kept


def run(jobs, steps, args, kept) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with (
        Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()) as bar,
        ProcessPoolExecutor(
            args.workers, initializer=_worker_init, initargs=(args.dataset,)
        ) as pool,
        args.out.open("a") as out,
    ):
        task = bar.add_task("trainings", total=len(jobs))
        futures = [
            pool.submit(_train, spec, s, steps, seed, args.select_every) for spec, s, seed in jobs
        ]
        for future in as_completed(futures):
            row = future.result()
            kept[(row["arch_id"], row["steps"], row["seed"], row["select_every"])] = row
            out.write(json.dumps(row) + "\n")
            out.flush()
            bar.advance(task)


_DATA = None


def _worker_init(dataset: str) -> None:
    global _DATA
    import torch

    from nas.data import load_dataset
    from workers.trial_data import TrialData

    torch.set_num_threads(1)
    _DATA = TrialData.from_prepared(load_dataset(dataset), "valid")


def _train(spec: dict, steps: int, budgets: list[int], seed: int, select_every: int) -> dict:
    from nas.arch.spec import ArchSpec
    from nas.search.early_stopping import DEFAULT_EVAL_ROWS
    from workers.train import TrainConfig
    from workers.trial import Rungs, SelectBest, evaluate

    checkpoints = tuple(s for s in budgets if s < steps) if steps == max(budgets) else ()
    # Without selection the checkpoints measure the whole split; with it, the checks' rows.
    rows = DEFAULT_EVAL_ROWS if select_every else 10**9
    rungs = Rungs(checkpoints, rows, lambda result: None) if checkpoints else None
    select = SelectBest(select_every, DEFAULT_EVAL_ROWS) if select_every else None
    config = TrainConfig(steps=steps, batch_size=BATCH, seed=seed)
    result = evaluate(ArchSpec.from_dict(spec), _DATA, config, rungs=rungs, select=select)
    return {
        "arch_id": result.arch_id,
        "steps": steps,
        "seed": seed,
        "select_every": select_every,
        "ne": result.ne,
        "auc": result.auc,
        "flops": result.flops,
        "train_seconds": result.train_seconds,
        "checkpoints": {str(f["step"]): f["ne"] for f in result.rungs[:-1]},
    }


def report(specs, steps, run: tuple[int, int], kept, rows_per_epoch: int) -> None:
    from rich.console import Console
    from rich.table import Table
    from scipy.stats import kendalltau

    ids = [s.arch_id for s in specs]
    ne = {s: [kept[(a, s, *run)]["ne"] for a in ids] for s in steps}
    full = steps[-1]
    inline = {s: [kept[(a, full, *run)]["checkpoints"][str(s)] for a in ids] for s in steps[:-1]}

    def top5(values, reference):
        best = set(sorted(range(len(ids)), key=lambda k: reference[k])[:5])
        return len(best & set(sorted(range(len(ids)), key=lambda k: values[k])[:5]))

    console = Console()
    table = Table(title=f"ranking agreement ({len(ids)} architectures, Kendall tau)")
    for column in ("budget", "against", "own training", "top-5 kept", "checkpoint of " + str(full)):
        table.add_column(column, justify="right")
    for r, reference in enumerate(steps[1:], start=1):
        for s in steps[:r]:
            own = kendalltau(ne[s], ne[reference]).statistic
            mid = kendalltau(inline[s], ne[reference]).statistic
            table.add_row(
                str(s),
                str(reference),
                f"{own:.2f}",
                f"{top5(ne[s], ne[reference])}/5",
                f"{mid:.2f}",
            )
    console.print(table)
    epoch = rows_per_epoch / BATCH
    worse = sum(ne[full][k] > ne[steps[-2]][k] for k in range(len(ids)))
    console.print(
        f"One epoch is {epoch:.0f} steps. {worse} of {len(ids)} architectures end worse at "
        f"{full} steps ({full / epoch:.1f} epochs) than at {steps[-2]}."
    )
    detail = Table(title="NE on validation, by budget (own training)")
    for column in ("arch_id", "flops", *map(str, steps), "best"):
        detail.add_column(column, justify="right")
    for k in sorted(range(len(ids)), key=lambda k: min(ne[s][k] for s in steps)):
        row = kept[(ids[k], full, *run)]
        best = min(steps, key=lambda s: ne[s][k])
        detail.add_row(
            ids[k], f"{row['flops']:.3g}", *(f"{ne[s][k]:.4f}" for s in steps), str(best)
        )
    console.print(detail)


def ceiling(specs, steps: int, args, kept) -> None:
    """The tau between two training seeds' rankings at ``steps``: the ceiling."""
    from rich.console import Console
    from scipy.stats import kendalltau

    ids = [s.arch_id for s in specs]
    first, second = (
        [kept[(a, steps, seed, args.select_every)]["ne"] for a in ids]
        for seed in (args.seed, args.also_seed)
    )
    tau = kendalltau(first, second).statistic
    spread = sum(abs(x - y) for x, y in zip(first, second, strict=True)) / len(ids)
    Console().print(
        f"seed-to-seed ceiling at {steps} steps: Kendall tau {tau:.2f} between training seeds "
        f"{args.seed} and {args.also_seed} over {len(ids)} architectures (mean |NE difference| "
        f"{spread:.4f}); no ranking of this space can agree with full training better."
    )


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
