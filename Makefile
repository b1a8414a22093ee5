# Uptrio: `make serve` and `make test` do all the set-up on a fresh machine (Python 3.11+, make).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# One stamp per set of packages, each rebuilt when pyproject.toml changes: `make serve`
# installs the service alone; `make test` (and lint, typecheck) adds the test and bench
# extras (the suite smoke-tests the benchmark harness).
SERVE_STAMP := $(VENV)/.installed-serve
TEST_STAMP  := $(VENV)/.installed-test

.PHONY: serve test lint typecheck install test-tools clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(SERVE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

# Everything a developer uses: the service, its tests, linters and benchmark harness.
install: $(TEST_STAMP)

# `make serve ARGS="--smtp-url smtp://127.0.0.1:8025 --smtp-from uptrio@127.0.0.1"`: more
# flags of `uptrio serve` (docs/operations.md, "Command line").
ARGS ?=
serve: $(SERVE_STAMP)
	$(BIN)/uptrio serve --host 127.0.0.1 --port 8080 --data-dir ./.uptrio $(ARGS)

lint: $(TEST_STAMP)
	$(BIN)/ruff check engine web store bench tests
	$(BIN)/ruff format --check engine web store bench tests
	$(BIN)/lint-imports

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

# Debian programs that only the test suite drives: headless Chromium and its driver
# (tests/browser) and wrk (`uptrio bench status-pages`, smoke-tested in tests/bench).
# Installed with apt-get when one is missing (a fresh machine runs as root); nothing to
# do when all are there. `make serve` needs none of them.
TEST_TOOLS := chromium=/usr/bin/chromium chromium-driver=/usr/bin/chromedriver wrk=/usr/bin/wrk

test-tools:
	@missing=""; for tool in $(TEST_TOOLS); do \
	  [ -x "$${tool#*=}" ] || missing="$$missing $${tool%%=*}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make test needs the Debian packages$$missing: run as root, or" \
	         "apt-get install$$missing" >&2; exit 1; fi; \
	  echo "installing the Debian packages$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $$missing >/dev/null; fi

# Two workers: the tests that run whole processes (bench/, ops/, browser/, a real
# `uptrio serve`) share one worker, one at a time, while the other takes the rest
# (tests/conftest.py, pytest_collection_modifyitems); either alone needs most of the time.
# Then the tests of a cluster's time bounds, marked `alone`, with the machine to themselves.
test: $(TEST_STAMP) lint typecheck test-tools
	$(BIN)/pytest -n 3 --dist loadgroup -m "not alone"
	$(BIN)/pytest -m alone

clean:
	rm -rf $(VENV) .uptrio
