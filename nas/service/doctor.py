"""``nas doctor``: is this setup ready to run searches? Each check says what it found and, when
something is wrong, what to do. Nothing is created or upgraded: a doctor only looks.

    ray        the cluster at --address / RAY_ADDRESS answers, or a local Ray will be started
    registry   the database opens and its schema is this recnas's (or will be upgraded)
    mlflow     the tracking store answers
    data       which datasets are prepared in the cache
    runs       the runs folder can be written
    kernels    the C kernels the trainer uses on CPU are built, or can be (else it is slower)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nas.core.errors import NasError
from nas.core.paths import data_cache_dir, runs_dir, tracking_file
from nas.service import endpoints
from nas.service.config import default_registry_url


@dataclass
class Check:
    name: str
    ok: bool
    found: str
    fix: str = ""


def ray_check(address: str | None) -> Check:
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        return Check("ray", True, "no address: each search starts a local Ray (loopback, token)")
    try:
        endpoints.ray_address(address, "--address")
    except NasError as err:
        return Check("ray", False, str(err))
    return Check("ray", True, f"a Ray head answers at {address}")


def registry_check(url: str | None) -> Check:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from nas.service.registry import schema

    url = url or default_registry_url()
    try:
        url = endpoints.registry_url(url, connect=False)
    except NasError as err:
        return Check("registry", False, str(err))
    parsed = make_url(url)
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").exists():
        return Check("registry", True, f"{shown}: not created yet (the first search creates it)")
    engine = create_engine(url, connect_args=endpoints.connect_args(parsed))
    try:
        with engine.connect() as connection:
            current = schema.current_revision(connection)
    except SQLAlchemyError as err:
        reason = " ".join(str(getattr(err, "orig", err)).split())[:300]
        return Check("registry", False, f"{shown}: {reason}", "is the database server up?")
    finally:
        engine.dispose()
    head = schema.head_revision()
    if current == head:
        return Check("registry", True, f"{shown}: schema at revision {head} (current)")
    if current is None:
        return Check("registry", True, f"{shown}: empty; the first search creates the schema")
    if current in schema.known_revisions():
        return Check("registry", True, f"{shown}: revision {current}; upgraded to {head} on use")
    return Check(
        "registry",
        False,
        f"{shown}: revision {current} is newer than this recnas knows ({head})",
        "upgrade recnas",
    )


def mlflow_check(uri: str | None) -> Check:
    try:
        if uri is None:
            checked = endpoints.local_tracking_uri()
        else:
            checked = endpoints.tracking_uri(uri, "--tracking-uri")
    except NasError as err:
        return Check("mlflow", False, str(err))
    if uri is not None:
        return Check("mlflow", True, f"{checked} answers")
    made = "" if tracking_file().exists() else "; made on first use"
    return Check("mlflow", True, f"{checked} (local{made})")


def data_check(cache_dir: Path | None) -> Check:
    from nas.data import DATASETS, prepare_command
    from nas.data.prepared import cached_names, open_prepared

    cache = cache_dir or data_cache_dir()
    own = [name for name in cached_names(cache) if name not in DATASETS]  # schema files'
    opened = {name: open_prepared(cache / name) for name in [*DATASETS, *own]}
    prepared = {name: found for name, found in opened.items() if found is not None}
    damaged = [name for name in own if opened[name] is None]  # a manifest no longer readable
    damaged += [name for name, found in prepared.items() if found.problems()]  # checksums
    if damaged:
        return Check(
            "data",
            False,
            f"damaged in {cache}: {', '.join(damaged)} (a file missing, changed or unreadable)",
            prepare_command(damaged[0], cache),
        )
    ready = list(prepared)
    if not ready:
        return Check(
            "data", False, f"no dataset prepared in {cache}", "nas data prepare movielens-1m"
        )
    return Check("data", True, f"prepared in {cache}: {', '.join(ready)}")


def runs_check() -> Check:
    folder = runs_dir()  # refuses a file in the way
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        return Check("runs", False, f"{existing} is not writable", "set RECNAS_RUNS_DIR")
    return Check("runs", True, f"{folder}")


def kernels_check() -> Check:
    from kernels.native import build

    status = build.status("rowwise_adam")
    found = f"rowwise_adam (the embeddings' optimizer): {status.found}"
    if status.usable:
        return Check("kernels", True, found)
    # Training works without it, on its PyTorch path (slower): not a failure.
    return Check("kernels", True, f"{found}; training uses the slower PyTorch path", status.fix)


def gpus_check() -> Check:
    """The CUDA GPUs this machine's torch sees: where trials with resources.gpus_per_trial
    and ``nas train --device auto`` train. None is not a failure: they train on the CPU."""
    import torch

    from workers.device import gpu_count

    count = gpu_count()
    if not count:
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        return Check(
            "gpus",
            True,
            f"none visible to torch {torch.__version__} ({build}): candidates train on the CPU",
        )
    names = [torch.cuda.get_device_name(i) for i in range(count)]
    return Check("gpus", True, f"{count}: {', '.join(names)} (resources.gpus_per_trial)")


def run_checks(
    address: str | None, registry_url: str | None, tracking_uri: str | None, cache: Path | None
) -> list[Check]:
    checks = {
        "ray": lambda: ray_check(address),
        "registry": lambda: registry_check(registry_url),
        "mlflow": lambda: mlflow_check(tracking_uri),
        "data": lambda: data_check(cache),
        "runs": runs_check,
        "kernels": kernels_check,
        "gpus": gpus_check,
    }
    found = []
    for name, check in checks.items():
        try:
            found.append(check())
        except NasError as err:  # e.g. a runs folder that is a file, behind every default
            found.append(Check(name, False, str(err)))
    return found
