# Self-bootstrapping targets: each creates .venv and node_modules when missing or stale, then runs.
#   make synth   synthesize the default tier (cdk.json) offline into cdk.out/, cdk-nag included, and report
#   make test    the whole test suite (first installs the real components the tests start: see test-tools)
#   make lint    ruff + mypy --strict on the package, zizmor on the GitHub workflows
#   make bench   CLI synth time of each tier against an empty CDK app, then the test suite's time
#   make checkov synthesize every tier (cdk-nag gate included) and scan each template with the pinned checkov
#   make floor-check  the unit tests on the lowest releases pyproject.toml declares, in a fresh venv
#   make docs    the API reference (pdoc) into docs/api/
#   make dist    sdist and wheel into dist/, checked with twine
# Pass context through CDK_ARGS, e.g. `make synth CDK_ARGS="-c tier=sagemaker"`.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# No telemetry or notices on an offline machine.
export CDK_DISABLE_CLI_TELEMETRY := true
# npm ci runs on the machine's own Node; everything after it on the Node LTS package.json pins (npm's `node`
# package puts its binary in node_modules/.bin): npx, the CDK CLI and the jsii kernel all start `node` from PATH.
HOST_PATH := $(PATH)
# cdk.json runs `python3 app.py`: make that the venv's python.
export PATH := $(CURDIR)/$(BIN):$(CURDIR)/node_modules/.bin:$(PATH)
CDK := npx --no-install cdk
CDK_ARGS ?=

.PHONY: bootstrap test-tools synth test lint bench checkov floor-check docs dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# synth needs only the package's own dependencies; test, lint and bench also need the dev extra, whose
# vllm-router wheel exists only for manylinux_2_28 (elsewhere pip builds it from source with Rust).
# pyproject.toml declares ranges; constraints.txt pins the exact releases this checkout runs on.
$(VENV)/.installed-app: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed: $(VENV)/.installed-app
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	PATH="$(HOST_PATH)" npm ci --no-audit --no-fund --silent
	touch $@

bootstrap: $(VENV)/.installed node_modules/.installed

# The real components the tests run on loopback, each installed by its own idempotent script (apt packages need
# root or sudo; the scripts say so when they cannot install).
test-tools:
	bash tools/gateway/setup.sh
	bash tools/observability/setup.sh
	bash tools/checkov/setup.sh
	bash tools/bench/setup.sh

synth: $(VENV)/.installed-app node_modules/.installed
	rm -rf cdk.out
	$(CDK) synth --quiet --no-notices --output cdk.out $(CDK_ARGS)
	$(BIN)/python tools/synth_report.py cdk.out

test: bootstrap test-tools
	$(BIN)/python -m pytest

lint: bootstrap
	$(BIN)/ruff check inference_tiers tests tools app.py
	$(BIN)/ruff format --check inference_tiers tests tools app.py
	MYPY_CACHE_DIR=$${MYPY_CACHE_DIR:-$$HOME/.cache/inference-tiers-mypy} $(BIN)/mypy inference_tiers
	$(BIN)/zizmor --offline --persona pedantic .github/workflows

bench: bootstrap
	$(BIN)/python tools/bench_synth.py

# One CLI synth per tier (TIERS in app_factory), each scanned before the next replaces cdk.out; every tier is
# scanned even when an earlier one fails, and any failed check fails the target.
checkov: $(VENV)/.installed-app node_modules/.installed
	bash tools/checkov/setup.sh
	bash tools/bench/setup.sh
	@failed=""; \
	for tier in $$($(BIN)/python -c "from inference_tiers.app_factory import TIERS; print(' '.join(TIERS))"); do \
	  echo "== tier $$tier: npx cdk synth (cdk-nag gate included), then checkov"; \
	  $(MAKE) --no-print-directory synth CDK_ARGS="-c tier=$$tier" || exit 1; \
	  $(BIN)/python tools/checkov/scan.py cdk.out || failed="$$failed $$tier"; \
	done; \
	if [ -n "$$failed" ]; then echo "checkov: failed checks in:$$failed"; exit 1; fi

# The declared lowest releases (pyproject's >= bounds) in a fresh venv under a temporary folder: the wheel must
# install without changing them, and the unit tests (snapshots excluded: they are reviewed against
# constraints.txt) must pass there.
floor-check: bootstrap test-tools
	bash tools/floor_check.sh

# The API reference (pdoc) of inference_tiers.constructs into docs/api/ (not committed); fails on a public name,
# method or constructor parameter without a docstring.
docs: bootstrap
	$(BIN)/python tools/build_docs.py docs/api

# The sdist and wheel PyPI gets (release.yml runs this), checked as PyPI will check them.
dist: bootstrap
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf cdk.out dist docs/api .pytest_cache .mypy_cache
