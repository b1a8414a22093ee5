# Uptrio: `make serve` and `make test` do all the set-up on a fresh machine (Python 3.11+, make).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test lint typecheck install test-tools clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/uptrio serve --host 127.0.0.1 --port 8080 --data-dir ./.uptrio

lint: $(STAMP)
	$(BIN)/ruff check engine web store bench tests
	$(BIN)/ruff format --check engine web store bench tests
	$(BIN)/lint-imports

typecheck: $(STAMP)
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
test: lint typecheck test-tools
	$(BIN)/pytest -n 2 --dist loadgroup

clean:
	rm -rf $(VENV) .uptrio
