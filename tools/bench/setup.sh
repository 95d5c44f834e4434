#!/usr/bin/env bash
# Install what `inference-tiers bench` runs for OpenAI-compatible targets, idempotently (CI calls it before make
# test): the aiperf tool venv in tools/bench/.venv, installed with --require-hashes from
# tools/bench/requirements.txt (never into the package's own environment), and the offline tokenizer aiperf counts
# tokens with, generated into tools/bench/.venv/tokenizer by tools/bench/make_tokenizer.py (no download at run time).
# Reruns do nothing unless requirements.txt or make_tokenizer.py changed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source tools/tool_venv.sh
tool_venv tools/bench tools/bench/make_tokenizer.py -- tools/bench/make_tokenizer.py tools/bench/.venv/tokenizer
"$venv/bin/python" -c "import importlib.metadata as m; print('tools/bench/setup.sh: aiperf', m.version('aiperf'), 'ready')"
