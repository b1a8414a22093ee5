# Uptrio: `make serve` and `make test` do all the set-up on a fresh machine (Python 3.11+, make).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test lint typecheck install clean

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

test: lint typecheck
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .uptrio
