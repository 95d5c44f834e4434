#!/usr/bin/env bash
# Regenerate tests/data/observability/grafana-dashboard-13.2.3.schema.json: the JSON schema of the classic dashboard
# JSON model (the `Dashboard` type of @grafana/schema, Apache-2.0, generated from Grafana's own CUE kinds), made
# with ts-json-schema-generator from the npm release. Grafana publishes no JSON schema file for dashboards; its
# TypeScript types are the closest published contract. Interfaces become additionalProperties: false, so a
# misspelled key in a rendered dashboard fails validation.
set -euo pipefail
out="$(cd "$(dirname "$0")/../.." && pwd)/tests/data/observability/grafana-dashboard-13.2.3.schema.json"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm install --no-audit --no-fund --silent @grafana/schema@13.2.3 ts-json-schema-generator@2.9.0 typescript@5
npx --no-install ts-json-schema-generator --no-type-check --type Dashboard \
  --path node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts -o "$out"
