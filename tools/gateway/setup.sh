#!/usr/bin/env bash
# Install what tests/gateway and tools/gateway/bench.py run for real, idempotently (CI calls it before make test):
#   - PostgreSQL from Debian's `postgresql` package (initdb, pg_ctl, psql; the tests start their own cluster);
#   - Redis from Debian's `redis-server` package (built with TLS; the tests start their own server with TLS and
#     AUTH, as ElastiCache/Valkey in non-cluster mode requires);
#   - the LiteLLM tool venv in tools/gateway/.venv, exactly the release the gateway's image pins, installed with
#     --require-hashes from tools/gateway/requirements.txt (never into the package's own environment).
# Reruns do nothing unless requirements.txt changed.
set -euo pipefail
cd "$(dirname "$0")/../.."

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" > /dev/null || missing+=(postgresql)
command -v redis-server > /dev/null || missing+=(redis-server)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "tools/gateway/setup.sh: ${missing[*]} missing; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

source tools/tool_venv.sh
tool_venv tools/gateway
"$venv/bin/python" -c "import importlib.metadata as m; print('tools/gateway/setup.sh: litellm', m.version('litellm'), 'ready')"
