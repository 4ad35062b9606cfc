"""The ``nas`` command line: one module per command group, ``render`` for how things are
shown, ``flags`` for shared flag types.

    nas data prepare movielens-1m          build (or reuse) the cached views of a dataset
    nas data list                          datasets and what is cached
    nas data rows NAME --out ROWS.jsonl    a split's rows in the raw form, labelled
    nas blocks                             the registered blocks and their parameters
    nas train SPEC.json --dataset NAME     train one architecture, print NE/AUC/FLOPs
    nas submit SEARCH.yaml                 run a search on Ray, logging to MLflow
    nas list | status ID | pareto ID       what the registry knows about searches
    nas resume ID | cancel ID              continue after a crash or Ctrl-C; stop a search
    nas retrain ID --pick knee             retrain picks and baselines, compare on test
      [--register NAME]                    ... and register the best in MLflow's registry
    nas models list | register | compare   registered models; measured side by side
    nas predict MODEL_URI --input ROWS     score raw rows with a registered model
    nas export MODEL_URI --out DIR         torch.export / TorchScript for serving
    nas fp8 probe SPEC.json                where FP8 is safe and fast in an architecture
    nas dashboard [ID ...]                 MLflow's UI at a search, or fronts compared
    nas doctor                             is this setup ready?

Errors in what the user gave (a spec, a flag, a data file) print one paragraph and exit 2;
a training run that diverges exits 1.
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import signal
import sys
from pathlib import Path

from nas.cli.render import STDOUT, console, phrase, styled
from nas.core.disk import NO_ROOM
from nas.core.errors import NasError, TrainingError, shown
from nas.core.paths import data_cache_dir, runs_dir

GROUPS = ("data", "train", "search", "retrain", "models", "fp8", "dashboard", "doctor")
# What the file system says of a path given on the command line (too long, not searchable,
# read-only, under a file): the user's to fix, as any bad input.
PATH_ERRORS = {
    errno.ENAMETOOLONG,
    errno.EACCES,
    errno.EPERM,
    errno.ENOTDIR,
    errno.EROFS,
    errno.ELOOP,
    errno.EISDIR,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):  # a command group without its command
        getattr(args, "group", parser).print_help()
        return 2
    try:
        code = args.run(args)  # a command may return an exit code; None is success
    except TrainingError as err:
        console.print(phrase(styled("error:", "red"), f" {err}"))
        return 1
    except NasError as err:  # user input, a file, a service: one paragraph, never markup
        console.print(phrase(styled("error:", "red"), f" {err}"))
        return 2
    except KeyboardInterrupt:
        console.print(styled("interrupted", "yellow"))
        return 130
    except OSError as err:
        if err.errno in PATH_ERRORS:  # a path the user gave that the system refuses
            named = f" {shown(str(err.filename), 200)}:" if err.filename else ""
            console.print(phrase(styled("error:", "red"), f" cannot use{named} {err.strerror}"))
            return 2
        if err.errno not in NO_ROOM:
            raise
        console.print(phrase(styled("error:", "red"), f" {_no_room(err)}"))
        return 1
    return code or 0


def _no_room(err: OSError) -> str:
    """What to do when a write found no room (a full disk, a quota, a file size limit): where
    recnas keeps its own files, move them; then run the command again, or do what its notes
    say (a search: resume it)."""
    notes = getattr(err, "__notes__", None)
    then = (
        "\n".join(["", *notes])
        if notes
        else ", and run the command again (what it was writing was not kept)"
    )
    if _writing_stdout(err):  # (nas ... > file, on a full disk)
        return f"cannot write the command's output (stdout): {err.strerror}"
    if not err.filename:
        return (
            f"{err.strerror}: free some space, or move the data cache (RECNAS_CACHE_DIR) or the "
            f"runs folder (RECNAS_RUNS_DIR) to a larger disk{then}"
        )
    path = Path(err.filename).resolve()
    try:  # the cache first: by default it is inside the runs folder
        own = {
            "data cache (RECNAS_CACHE_DIR)": data_cache_dir(),
            "runs folder (RECNAS_RUNS_DIR)": runs_dir(),
        }
    except NasError:  # a runs folder that cannot be: not what this command wrote to
        own = {}
    moves = [what for what, folder in own.items() if path.is_relative_to(folder)]
    where = f"or move the {moves[0]} to a larger disk" if moves else "or write elsewhere"
    return (
        f"cannot write {shown(err.filename, 200)}: {err.strerror}. Free some space, {where}{then}"
    )


def _writing_stdout(err: OSError) -> bool:
    """Whether ``err`` was raised writing standard output: ``emit_json``'s, or rich's
    console's (by the frames it passed through)."""
    if err.filename == STDOUT:
        return True
    frame = err.__traceback__
    while frame is not None:
        owner = frame.tb_frame.f_locals.get("self")
        if owner is not None and sys.stdout in (owner, getattr(owner, "file", None)):
            return True
        frame = frame.tb_next
    return False


def entry() -> int:
    """The ``nas`` script: ``main``, then ``gc.freeze()`` before the interpreter exits.

    At exit Python collects garbage over every object still alive, and a search leaves
    torch's, Ray's and MLflow's object graphs behind: those collections took 2.1-2.4 s of a
    finished ``nas submit`` and 0.3-0.5 s of a ``nas list`` (measured on 2 cores). Frozen
    objects are skipped by the collector; they are still freed, and atexit handlers still
    run. Not in ``main``, which tests and scripts call in a process that lives on.

    Not after Triton was loaded (``nas export`` does, through torch.export's ``torch._dynamo``):
    its nanobind bindings print a screenful of "leaked instance" warnings at exit for the
    objects the collector did not free.

    A reader of its output that leaves early (``nas predict ... --json | head``) ends it
    quietly, as it ends a Unix tool, with the exit status of a process killed by SIGPIPE."""
    try:
        code = main()
    except BrokenPipeError:
        # Python flushes stdout again at exit: into nothing, not the closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    if "triton" not in sys.modules:
        gc.freeze()
    return code


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="nas", description="Neural architecture search for ranking models."
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for group in GROUPS:
        importlib.import_module(f"nas.cli.{group}").add_commands(commands)
    return parser
