# Two commands on a fresh machine: `make run` and `make test`.
# Both create .venv when missing and (re)install only when pyproject.toml changed.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench lint clean-venv package package-check

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/dynadesk $(ARGS)

lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m mypy

# Two pytest-xdist workers (the CI machine has 2 cores); PYTEST_WORKERS=0 runs in this process.
PYTEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# The desktop bundle (PyInstaller, one folder) and its tarball with install.sh; never part of `make test`.
PKG_STAMP := $(VENV)/.installed-package

$(PKG_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[test,package]"
	@touch $(PKG_STAMP)

package: $(PKG_STAMP)
	$(BIN)/python packaging/build.py

package-check:
	sh packaging/check.sh

clean-venv:
	rm -rf $(VENV)
