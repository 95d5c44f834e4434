#!/usr/bin/env bash
# Fetch the kubernetes-sigs/agent-sandbox Helm chart (controller, CRDs, conversion webhook) at a pinned release.
#
# The chart lives in the repository (helm/) and is not published to any chart repository, so `cdk deploy`
# installs it from a local copy. The copy gets one change, writable-tmp.patch (next to this script): an emptyDir
# at /tmp, where the controller writes its webhook certificates; the chart mounts nothing there, and its root
# file system is read-only (the chart has no value for extra volumes). Needs git and internet access. Usage:
#   inference_tiers/assets/sandbox/fetch-agent-sandbox-chart.sh [DEST]   (default DEST: build/agent-sandbox-chart)
#   npx cdk deploy -c tier=agent-sandbox -c agent-sandbox.controller_chart_dir=DEST
#   npx cdk deploy -c tier=platform -c platform.controller_chart_dir=DEST
set -euo pipefail

REPOSITORY="https://github.com/kubernetes-sigs/agent-sandbox.git"
# Release v0.5.6 (2026-08-20): the release whose v1beta1 CRDs the tests validate every manifest against
# (tests/data/sandbox/agent-sandbox). Move it deliberately, together with AGENT_SANDBOX_VERSION and the CRDs.
COMMIT="211b7579cabed9460c1a692eb687084ff4c5879d"
DEST="${1:-build/agent-sandbox-chart}"
PATCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/writable-tmp.patch"

command -v git >/dev/null || { echo "error: git is required" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git -C "$work" init --quiet
git -C "$work" remote add origin "$REPOSITORY"
git -C "$work" fetch --quiet --depth 1 origin "$COMMIT"
git -C "$work" checkout --quiet FETCH_HEAD
git -C "$work" apply "$PATCH"

rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
cp -R "$work/helm" "$DEST"

echo "Copied the agent-sandbox chart to $DEST (kubernetes-sigs/agent-sandbox@$COMMIT, v0.5.6, with writable-tmp.patch)."
echo "Deploy with: npx cdk deploy -c tier=agent-sandbox -c agent-sandbox.controller_chart_dir=$DEST"
echo "        or: npx cdk deploy -c tier=platform -c platform.controller_chart_dir=$DEST"
