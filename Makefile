# One entry point for people and CI: `make run` starts the game, `make test` tests it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install run test lint bench bench-readme clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench]'
	touch $@

run: install
	$(VENV)/bin/wgctl run

# Two workers, a test file each at a time (a module's shared fixtures start once): every
# test has its own database, key prefix and free ports, so they run side by side. The
# benches' tests run after them, alone: each holds dozens of PostgreSQL connections (two
# at once could pass max_connections) and measures.
test: install
	bash scripts/ensure-services.sh
	$(PY) -m pytest -n 2 --dist loadfile --ignore=tests/bench
	$(PY) -m pytest tests/bench

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

bench: install
	bash scripts/ensure-services.sh
	$(PY) -m bench all

# the README's results table, from the result JSONs committed in bench/published/
bench-readme: install
	$(PY) -m bench readme

clean:
	rm -rf $(VENV) var .pytest_cache
