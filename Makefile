# Everything sets itself up: a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup test demo lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,align,plots]'
	touch $@

setup: $(BIN)/.installed

test: setup
	$(BIN)/ruff check ordo tests
	$(BIN)/mypy ordo
	$(BIN)/python -m pytest

demo: setup
	$(BIN)/ordo demo --out demo_run

lint: setup
	$(BIN)/ruff check ordo tests
	$(BIN)/mypy ordo

bench: setup
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/peers.py

clean:
	rm -rf demo_run .pytest_cache
