# recnas: the commands a newcomer needs. Every target sets itself up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup compiled test test-fast demo lint lock lock-cuda check-cuda-lock clean

# The pinned environment: requirements.lock (the CPU wheel of torch), or on a Linux machine
# with NVIDIA GPUs `make setup LOCK=requirements-cuda.lock` (PyPI's CUDA build of torch).
LOCK ?= requirements.lock
PYPI := --no-config --index-url https://pypi.org/simple
LINUX_GPU := --python-version 3.11 --python-platform x86_64-manylinux_2_28

setup: $(STAMP)

# Re-install only when the declared or locked dependencies change. pip installs torch (pip
# finds the CPU wheel on this machine's disk; uv would not) and uv, which installs the rest:
# about 25 s where pip took 85. Compiled to bytecode: where PYTHONDONTWRITEBYTECODE is set (it
# is on this machine), every process would otherwise compile every module it imports.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(LOCK) torch uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python \
		-c $(LOCK) -e ".[dev]"
	touch $(STAMP)

# Three tests at a time on 2 cores: the end-to-end ones spend much of their time waiting on
# Ray, subprocesses and the disk, and more at once overload the cores (benchmarks/README.md
# has the suite's times). loadfile runs each test file on one worker, so a module fixture (a
# search, a Postgres server) is built once; files go out in the order tests/conftest.py sorts
# them (longest first), not xdist's default (most tests first). (loadgroup does not group
# under pytest 9.2: xdist 3.8 renames a test's node id in a way pytest 9.2 no longer reads.)
PYTEST := $(BIN)/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder

test: setup compiled
	$(PYTEST)

# Skips the slow end-to-end runs of the CLI (CI runs everything).
test-fast: setup compiled
	$(PYTEST) -m "not slow"

# The project's own modules as bytecode: where PYTHONDONTWRITEBYTECODE is set, every `nas`
# process and Ray worker would otherwise compile each one it imports (0.5 s a process; the
# suite starts about 200). Only changed files are compiled again.
compiled:
	$(BIN)/python -m compileall -q nas search_spaces blocks kernels workers dashboards

# A real search: 20 candidates + the 4 baselines on MovieLens-1M, a few minutes on 2 cores.
demo: setup compiled
	$(BIN)/nas data prepare movielens-1m
	$(BIN)/nas submit examples/searches/ctr_quick.yaml

# ruff, and the import layers declared in pyproject.toml (no loops, nothing imports upwards).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

# Regenerate requirements.lock from a fresh resolve of pyproject.toml.
lock:
	rm -rf /tmp/recnas-lock && $(PYTHON) -m venv /tmp/recnas-lock
	/tmp/recnas-lock/bin/python -m pip install --quiet -e ".[dev]"
	/tmp/recnas-lock/bin/python -m pip freeze --exclude-editable | sed 's/+cpu$$//' > requirements.lock

# requirements-cuda.lock: requirements.lock's pins, with PyPI's CUDA torch and the triton and
# NVIDIA libraries it needs, resolved for Linux x86_64 (no GPU needed here).
lock-cuda: setup
	grep -v '^torch==\|^triton==' requirements.lock > /tmp/recnas-cpu-pins.txt
	head -4 requirements-cuda.lock > /tmp/recnas-cuda-header.txt
	$(BIN)/uv pip compile pyproject.toml --extra dev $(PYPI) $(LINUX_GPU) --quiet --no-annotate \
		--no-header -c /tmp/recnas-cpu-pins.txt -o /tmp/recnas-cuda.lock
	cat /tmp/recnas-cuda-header.txt /tmp/recnas-cuda.lock > requirements-cuda.lock

# That requirements-cuda.lock installs on Linux x86_64 from PyPI (a dry run: nothing is
# downloaded but metadata).
check-cuda-lock: setup
	$(BIN)/uv pip install --dry-run $(PYPI) $(LINUX_GPU) --target /tmp/recnas-cuda-target \
		-r requirements-cuda.lock

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
