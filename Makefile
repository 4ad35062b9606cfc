# recnas: the commands a newcomer needs. Every target sets itself up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup compiled test test-fast demo lint lock clean

setup: $(STAMP)

# Re-install only when the declared or locked dependencies change. pip installs torch (pip
# finds the CPU wheel on this machine's disk; uv would not) and uv, which installs the rest:
# about 25 s where pip took 85. Compiled to bytecode: where PYTHONDONTWRITEBYTECODE is set (it
# is on this machine), every process would otherwise compile every module it imports.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c requirements.lock torch uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python \
		-c requirements.lock -e ".[dev]"
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

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
