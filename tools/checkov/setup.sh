#!/usr/bin/env bash
# Install the pinned checkov into its own tool venv, tools/checkov/.venv, idempotently (make checkov and make
# test-tools call it): --require-hashes from tools/checkov/requirements.txt, never into the package's environment,
# whose dependencies checkov's pins clash with. Reruns do nothing unless requirements.txt changed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source tools/tool_venv.sh
tool_venv tools/checkov
# The version from the package metadata: running checkov would leave its parser cache (.lark_cache_*) in TMPDIR.
"$venv/bin/python" -c "import importlib.metadata as m; print('tools/checkov/setup.sh: checkov', m.version('checkov'), 'ready')"
