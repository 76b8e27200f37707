# Every target bootstraps .venv from the project's own files when it is missing or stale.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := test,aiohttp,asgi,cli,bench,dask

.PHONY: demo test test-all bench lint lock clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m streamcrypt.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# Long soaks and gigabyte runs (marked slow) on top of the normal suite.
test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	$(BIN)/python -m bench

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check streamcrypt
	$(BIN)/mypy

# Re-pin every dependency to what currently resolves (run after editing pyproject.toml).
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip
	.lock-venv/bin/python -m pip install --quiet -e '.[$(EXTRAS)]'
	.lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^streamcrypt' > constraints.txt
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
