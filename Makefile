# Everything sets itself up: a fresh clone needs only `make test` or `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup chromium test demo lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,align,fast_align,plots,serve,browser]'
	touch $@

setup: $(BIN)/.installed

# the browser test of `ordo serve`'s page drives the system's Chromium (Playwright's own download cannot run
# here); installed with apt where it is missing and we may, else that one test is skipped
APT := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n) env DEBIAN_FRONTEND=noninteractive apt-get
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  (command -v apt-get >/dev/null && { $(APT) install -y -q chromium >/dev/null 2>&1 || \
	    { $(APT) update -q >/dev/null 2>&1 && $(APT) install -y -q chromium >/dev/null; }; }) || \
	  echo "no Chromium installed: the browser test of ordo serve will be skipped"

# the tests' idle OpenMP threads sleep rather than spin (tests/conftest.py sets it too), so that a test run and
# other work on the same cores do not slow each other down; two pytest-xdist workers keep both cores busy through
# the tests' imports, subprocess starts and small products (pytest -n 0 runs them in one process)
TEST_WORKERS ?= 2
test: setup chromium
	$(BIN)/ruff check ordo tests
	$(BIN)/mypy ordo
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -n $(TEST_WORKERS)

demo: setup
	$(BIN)/ordo demo --out demo_run

lint: setup
	$(BIN)/ruff check ordo tests
	$(BIN)/mypy ordo

bench: setup
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/peers.py
	$(BIN)/python bench/cpu_defaults.py

clean:
	rm -rf demo_run .pytest_cache
