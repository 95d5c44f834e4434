#!/usr/bin/env bash
# Install what `inference-tiers bench` runs for OpenAI-compatible targets, idempotently (CI calls it before make
# test): the aiperf tool venv in tools/bench/.venv, installed with --require-hashes from
# tools/bench/requirements.txt (never into the package's own environment), and the offline tokenizer aiperf counts
# tokens with, generated into tools/bench/.venv/tokenizer by tools/bench/make_tokenizer.py (no download at run time).
# Reruns do nothing unless requirements.txt or make_tokenizer.py changed.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=tools/bench/.venv
stamp="$venv/.installed-$(cat tools/bench/requirements.txt tools/bench/make_tokenizer.py | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
    -r tools/bench/requirements.txt
  "$venv/bin/python" tools/bench/make_tokenizer.py "$venv/tokenizer"
  touch "$stamp"
fi
"$venv/bin/python" -c "import importlib.metadata as m; print('tools/bench/setup.sh: aiperf', m.version('aiperf'), 'ready')"
