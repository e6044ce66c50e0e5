# Two commands on a fresh machine: `make run` and `make test`.
# Both create .venv when missing and (re)install only when pyproject.toml or requirements.lock changed.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock
# The torch pin is written once, in pyproject.toml. It is installed on its own, first, and the lock leaves
# torch out: pip takes this exact release's CPU wheel from the machine's disk, where a resolver that
# looked torch up in the index would lock a CUDA build and its nvidia-* packages.
TORCH_PIN := $(shell sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' pyproject.toml)
ifeq ($(TORCH_PIN),)
$(error pyproject.toml has no "torch==..." dependency)
endif

.PHONY: run test bench lint lock clean-venv package package-check check-transformers

# Exact versions from the lock (every extra: test, server, package, lock), then the project itself
# without resolving again, then a check that the lock still covers what pyproject.toml asks for.
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet "$(TORCH_PIN)"
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@$(BIN)/python -m pip check || { echo "requirements.lock lacks what pyproject.toml asks for: run make lock" >&2; exit 1; }
	@touch $(STAMP)

# Rewrite requirements.lock from pyproject.toml's ranges, keeping the pins that still fit
# (UPGRADE=1 takes the newest releases that fit). Locked for CPython 3.11 on Linux x86_64.
# Needs only pip-tools, not an installed project: a dependency added to pyproject.toml makes the lock stale.
lock:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$$(grep '^pip-tools==' $(LOCK) || echo pip-tools)"
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/python -m piptools compile --quiet --strip-extras \
		--extra test --extra package --extra lock --unsafe-package torch --unsafe-package dynadesk \
		--no-emit-index-url --no-emit-find-links $(if $(UPGRADE),--upgrade) --output-file $(LOCK) pyproject.toml

run: $(STAMP)
	$(BIN)/dynadesk $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check
	$(BIN)/lint-imports
	$(BIN)/python -m mypy

# Two pytest-xdist workers (the CI machine has 2 cores); PYTEST_WORKERS=0 runs in this process.
PYTEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The bundled model's int8 form under another transformers release than the lock's (TRANSFORMERS=5.24.0):
# that release alone is installed apart (the lock's set serves its dependencies) and the model is prepared
# with it from scratch. Run it before widening pyproject.toml's transformers range.
check-transformers: $(STAMP)
	@test -n "$(TRANSFORMERS)" || { echo "name the release: make check-transformers TRANSFORMERS=5.24.0" >&2; exit 1; }
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target .transformers-$(TRANSFORMERS) "transformers==$(TRANSFORMERS)"
	DYNADESK_OTHER_TRANSFORMERS=$(abspath .transformers-$(TRANSFORMERS)) $(BIN)/python -m pytest -n 0 -p no:cacheprovider \
		tests/local_models/test_int8_upgrade.py

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# The desktop bundle (PyInstaller, one folder) and its tarball with install.sh; never part of `make test`.
# PyInstaller comes from the lock with everything else.
package: $(STAMP)
	$(BIN)/python packaging/build.py

package-check:
	sh packaging/check.sh

clean-venv:
	rm -rf $(VENV)
