#!/usr/bin/env bash
# Install what tests/observability runs for real, idempotently (make test-tools calls it before make test):
#   - promtool and the prometheus server from Debian's `prometheus` package (check/test the rendered rules; the
#     loopback end-to-end test starts its own server);
#   - amtool from Debian's `prometheus-alertmanager` package (checks the rendered Alertmanager configuration).
# The packages are downloaded with apt and unpacked into tools/observability/.prometheus (git-ignored) rather than
# installed: `apt-get install prometheus` would register and start a system service on :9090 (postinst), which the
# tests never want, and unpacking needs no root. Binaries already on PATH (an apt-installed prometheus) win.
set -euo pipefail
cd "$(dirname "$0")/../.."

dest=tools/observability/.prometheus
want=(usr/bin/promtool usr/bin/prometheus usr/bin/amtool)
missing=0
for bin in "${want[@]}"; do
  [ -x "$dest/$bin" ] || command -v "$(basename "$bin")" > /dev/null || missing=1
done
if [ "$missing" -eq 1 ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  if ! (cd "$work" && apt-get download -qq prometheus prometheus-alertmanager 2> /dev/null); then
    [ "$(id -u)" -eq 0 ] && apt-get update -qq
    (cd "$work" && apt-get download -qq prometheus prometheus-alertmanager)
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$dest"; done
fi
for bin in "${want[@]}"; do
  path="$dest/$bin"
  [ -x "$path" ] || path="$(command -v "$(basename "$bin")")"
  echo "tools/observability/setup.sh: $("$path" --version 2>&1 | head -1)"
done
