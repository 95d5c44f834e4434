#!/usr/bin/env bash
# Fetch the SageMaker HyperPod dependency Helm chart at a pinned commit and package its sub-charts.
#
# The chart (aws/sagemaker-hyperpod-cli, helm_chart/HyperPodHelmChart) is not published to any chart
# repository, and several sub-charts are remote (NVIDIA and EFA device plugins...), so `cdk deploy` needs a
# local copy with charts/*.tgz filled in. Needs git, helm 3 and internet access. Usage:
#   inference_tiers/assets/hyperpod/fetch-dependency-chart.sh [DEST]      (default DEST: build/hyperpod-dependency-chart)
#   npx cdk deploy -c tier=hyperpod -c hyperpod.dependency_chart_dir=DEST
set -euo pipefail

REPOSITORY="https://github.com/aws/sagemaker-hyperpod-cli.git"
# Pinned for reproducible installs: the commit whose inference-operator CRDs the tests validate against
# (2026-06-22). Move it deliberately, and re-read the chart's values when you do.
COMMIT="011ca927123e02b35a399935bbb3ab1905fe33c7"
DEST="${1:-build/hyperpod-dependency-chart}"

for tool in git helm; do
  command -v "$tool" >/dev/null || { echo "error: $tool is required" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git -C "$work" init --quiet
git -C "$work" remote add origin "$REPOSITORY"
git -C "$work" fetch --quiet --depth 1 origin "$COMMIT"
git -C "$work" checkout --quiet FETCH_HEAD

rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
cp -R "$work/helm_chart/HyperPodHelmChart" "$DEST"
# Resolves every dependency in Chart.yaml (at the versions Chart.lock/Chart.yaml pin) into $DEST/charts/.
helm dependency build "$DEST"

echo "Packaged the HyperPod dependency chart at $DEST (sagemaker-hyperpod-cli@$COMMIT)."
echo "Deploy with: npx cdk deploy -c tier=hyperpod -c hyperpod.dependency_chart_dir=$DEST"
