# recnas: the commands a newcomer needs. Every target sets itself up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test test-fast demo lint lock clean

setup: $(STAMP)

# Re-install only when the declared or locked dependencies change.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c requirements.lock -e ".[dev]"
	touch $(STAMP)

# Two tests at a time: the end-to-end ones spend much of their time waiting on Ray and
# subprocesses, so two on 2 cores finish the suite in 12-21 minutes instead of 23-26.
PYTEST := $(BIN)/python -m pytest -n 2 --dist worksteal

test: setup
	$(PYTEST)

# Skips the slow end-to-end runs of the CLI (CI runs everything).
test-fast: setup
	$(PYTEST) -m "not slow"

# A real search: 20 candidates + the 4 baselines on MovieLens-1M, 3-4 minutes on 2 cores.
demo: setup
	$(BIN)/nas data prepare movielens-1m
	$(BIN)/nas submit examples/searches/ctr_quick.yaml

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Regenerate requirements.lock from a fresh resolve of pyproject.toml.
lock:
	rm -rf /tmp/recnas-lock && $(PYTHON) -m venv /tmp/recnas-lock
	/tmp/recnas-lock/bin/python -m pip install --quiet -e ".[dev]"
	/tmp/recnas-lock/bin/python -m pip freeze --exclude-editable | sed 's/+cpu$$//' > requirements.lock

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
