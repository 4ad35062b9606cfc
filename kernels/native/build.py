"""C kernels for the CPU (``kernels/native/*.c``), compiled on first use with the machine's C
compiler and loaded with ctypes.

Why C through ctypes and not a PyTorch C++ extension: these kernels take raw pointers and
need nothing of torch's, so they compile in a quarter of a second with no headers but C's,
where an extension compiled against torch's headers takes about a minute on 2 cores, on
every machine and every new venv. Each library is cached under ``RECNAS_KERNEL_CACHE``
(default ``~/.cache/recnas/kernels``), named by a hash of its source, the compiler and the
flags, so an edited kernel or another compiler builds anew; several processes building at
once each write their own file and rename it into place.

Where there is no compiler (or the build fails, or ``RECNAS_NATIVE_KERNELS=0``), ``load``
returns None and the callers use their PyTorch reference; ``status`` says which (``nas
doctor`` shows it).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCES = Path(__file__).resolve().parent
# Baseline x86-64 / aarch64 code, no -march=native: a cache shared by the nodes of a cluster
# must run on each of them. -ffp-contract=off: no fused multiply-adds the source does not
# write, so the arithmetic is the source's on every compiler.
FLAGS = ("-O3", "-std=c11", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno")


def cache_dir() -> Path:
    configured = os.environ.get("RECNAS_KERNEL_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = Path.home() / ".cache"
        except (RuntimeError, KeyError):  # no home directory: a throwaway build folder
            base = Path(tempfile.gettempdir()) / f"recnas-{os.getuid()}"
    return Path(base) / "recnas" / "kernels"


def enabled() -> bool:
    return os.environ.get("RECNAS_NATIVE_KERNELS", "1") != "0"


@functools.cache
def _compiler() -> tuple[str, str] | None:
    """(path, version line) of $CC or cc, or None if there is none."""
    found = shutil.which(os.environ.get("CC", "cc"))
    if found is None:
        return None
    try:
        done = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return found, (done.stdout.splitlines() or [""])[0]


@dataclass(frozen=True)
class Status:
    """Whether a kernel is (or can be) built here, what was found, and what to do if not."""

    usable: bool
    found: str
    fix: str = ""


_failures: dict[str, Status] = {}
CACHE_FIX = "set RECNAS_KERNEL_CACHE to a writable folder"


def _no_compiler() -> Status:
    return Status(
        False, f"no C compiler ({os.environ.get('CC', 'cc')}) on PATH", "install gcc (or set CC)"
    )


def _target(name: str, compiler: tuple[str, str]) -> Path:
    """Where the library of ``kernels/native/{name}.c`` built by ``compiler`` is cached."""
    source = SOURCES / f"{name}.c"
    key = hashlib.sha256(
        b"\0".join([source.read_bytes(), *(s.encode() for s in (*compiler, *FLAGS))])
    ).hexdigest()[:16]
    return cache_dir() / f"{name}-{key}.so"


@functools.cache
def _load(name: str) -> ctypes.CDLL | None:
    compiler = _compiler()
    if compiler is None:
        _failures[name] = _no_compiler()
        return None
    target = _target(name, compiler)
    try:
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
                built = Path(scratch) / target.name
                source = SOURCES / f"{name}.c"
                done = subprocess.run(
                    [compiler[0], *FLAGS, str(source), "-o", str(built), "-lm"],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                if done.returncode != 0:
                    found = f"{compiler[0]} failed: {done.stderr.strip()[:500]}"
                    _failures[name] = Status(False, found, "set CC to a working C compiler")
                    return None
                os.replace(built, target)
        return ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as err:
        _failures[name] = Status(False, f"could not build or load {target}: {err}", CACHE_FIX)
        return None


def load(name: str) -> ctypes.CDLL | None:
    """The compiled ``kernels/native/{name}.c`` (built now if it is not cached), or None."""
    return _load(name) if enabled() else None


def status(name: str) -> Status:
    """Is ``kernels/native/{name}.c`` usable here, building nothing: a library loaded or cached,
    or a compiler to build it with on first use and a cache folder to build it into."""
    if not enabled():
        return Status(False, "turned off (RECNAS_NATIVE_KERNELS=0)", "unset RECNAS_NATIVE_KERNELS")
    if name in _failures:
        return _failures[name]
    compiler = _compiler()
    if compiler is None:
        return _no_compiler()
    target = _target(name, compiler)
    if target.exists():
        return Status(True, f"built with {compiler[1]}: {target}")
    existing = next(p for p in target.parents if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        found = f"the kernel cache {target.parent} cannot be made ({existing} is in the way)"
        return Status(False, found, CACHE_FIX)
    return Status(True, f"built on first use with {compiler[1]}")
