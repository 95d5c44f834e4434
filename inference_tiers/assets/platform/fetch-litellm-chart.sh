#!/usr/bin/env bash
# Fetch LiteLLM's componentized Helm chart (helm/litellm of BerriAI/litellm) at the commit whose appVersion is the
# proxy release the project pins (1.104.0). The repository is large, so only that folder is checked out (sparse,
# depth 1). The chart depends on the `lens` library chart (oci://ghcr.io/berriai/charts): when the commit does not
# carry charts/lens-*.tgz, `helm dependency build` fetches it, so the copy installs offline from the CDK asset.
# Needs git (and helm when the dependency must be fetched) and internet access. Usage:
#   inference_tiers/assets/platform/fetch-litellm-chart.sh [DEST]   (default DEST: build/litellm-chart)
#   then PlatformGateway(..., chart_directory=Path(DEST))
set -euo pipefail

REPOSITORY="https://github.com/BerriAI/litellm.git"
# Chart.yaml here: version 1.0.0, appVersion "1.104.0" (= LITELLM_VERSION). Move it together with the proxy pin
# and tests/data/platform/litellm-chart.
COMMIT="5cf956f7a83c1679899d4ae320ca7549ce39a5ec"
DEST="${1:-build/litellm-chart}"

command -v git >/dev/null || { echo "error: git is required" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git -C "$work" init --quiet
git -C "$work" remote add origin "$REPOSITORY"
git -C "$work" sparse-checkout set helm/litellm
git -C "$work" fetch --quiet --depth 1 --filter=blob:none origin "$COMMIT"
git -C "$work" checkout --quiet FETCH_HEAD

chart="$work/helm/litellm"
if ! ls "$chart"/charts/lens-*.tgz >/dev/null 2>&1; then
  command -v helm >/dev/null || { echo "error: helm is required to fetch the lens dependency" >&2; exit 1; }
  helm dependency build "$chart"
fi

rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
cp -R "$chart" "$DEST"
echo "Copied the LiteLLM chart to $DEST (BerriAI/litellm@$COMMIT, appVersion 1.104.0)."
