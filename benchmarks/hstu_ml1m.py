"""HSTU next-item prediction on MovieLens-1M, in the generative-recommenders setting.

Method: leave-last-out per user (last item: test; the one before: validation), 2 HSTU layers,
1 head, d = 50, sequences up to N = 200, sampled softmax with 128 negatives (drawn per
position), Adam (lr 1e-3), batch 128. Validation NDCG@10 every 5 epochs picks the checkpoint;
the test split is scored once, ranking each user's last item among all items the user has not
rated yet (as SASRec and the generative-recommenders evaluation do): HR@10 and NDCG@10. The
same ranking with the rated items left in is printed below it. The reference is the published
figures (SASRec 0.2853 / 0.1603, HSTU 0.3097 / 0.1720), printed beside ours.

    .venv/bin/python benchmarks/hstu_ml1m.py [--epochs 50] [--dataset movielens-1m]
"""

from __future__ import annotations

import argparse

import torch
from rich.console import Console
from rich.table import Table

from nas.cli.flags import whole_number
from nas.data import load_dataset
from workers.next_item import NextItemConfig, UserSequences, evaluate, fit

SEQUENCE_DATASETS = ("movielens-1m", "movielens-100k")  # per-user rating sequences, timed


PUBLISHED = {  # on MovieLens-1M
    "SASRec (published)": (0.2853, 0.1603),
    "HSTU (published)": (0.3097, 0.1720),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="movielens-1m", choices=SEQUENCE_DATASETS)
    parser.add_argument("--epochs", type=whole_number(1), default=50)
    parser.add_argument("--threads", type=whole_number(1), default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    console = Console()
    data = UserSequences.from_prepared(load_dataset(args.dataset))
    console.print(f"{len(data.items)} users, {len(data.item_ids)} items; training ...")

    def report(epoch, loss, valid, seconds):
        shown = ""
        if valid:
            shown = (
                f"  valid NDCG@10 {valid['ndcg@10']:.4f}"
                f" ({valid['ndcg@10_with_seen']:.4f} with seen items)"
            )
        console.print(f"epoch {epoch:3d}  loss {loss:.4f}{shown}  {seconds:6.0f} s")

    model, info = fit(data, NextItemConfig(epochs=args.epochs), report)
    test = evaluate(model, data, cut=1)
    table = Table(
        title=f"{args.dataset}, test split (leave-last-out), all unrated items ranked",
        title_justify="left",
    )
    for column in ("model", "HR@10", "NDCG@10", f"train seconds ({args.threads} threads)"):
        table.add_column(column, justify="left" if column == "model" else "right")
    table.add_row(
        f"recnas HSTU, {args.epochs} epoch{'s' * (args.epochs > 1)}",
        f"{test['hr@10']:.4f}",
        f"{test['ndcg@10']:.4f}",
        f"{info['seconds']:.0f}",
    )
    table.add_row(
        "  (rated items left in)",
        f"{test['hr@10_with_seen']:.4f}",
        f"{test['ndcg@10_with_seen']:.4f}",
        "",
    )
    for name, (hr, ndcg) in PUBLISHED.items() if args.dataset == "movielens-1m" else ():
        table.add_row(name, f"{hr:.4f}", f"{ndcg:.4f}", "")
    console.print(table)


if __name__ == "__main__":
    main()
