#!/usr/bin/env bash
# The declared floor: a fresh venv (in a temporary folder, removed at exit) first gets the lowest release of each
# runtime dependency that pyproject.toml allows (its >= bounds), as a user's app would already hold them; the
# built wheel must then install without changing any of them. The test suite then runs there with the dev extra
# (snapshot tests left out: snapshots are reviewed against constraints.txt's exact releases only).
# Extra arguments go to pytest (e.g. a subset of test files).
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PYTHON:-python3}" -m venv "$work/venv"
py="$work/venv/bin/python"

# pyproject's own bounds, read with the venv's pip's vendored packaging (no install needed for it).
"$py" - pyproject.toml >"$work/floors.txt" <<'PY'
import sys
import tomllib

from pip._vendor.packaging.requirements import Requirement

for line in tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]:
    requirement = Requirement(line)
    floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    if len(floors) != 1:
        sys.exit(f"pyproject.toml: {line!r} needs exactly one >= bound (the floor this check installs)")
    print(f"{requirement.name}=={floors[0]}")
PY
echo "floor-check: installing the declared floors: $(tr '\n' ' ' <"$work/floors.txt")"
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet -r "$work/floors.txt"

"$py" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" .
wheel=$(ls "$work"/dist/inference_tiers-*.whl)
"$py" -m pip install --quiet "$wheel"
# Every floor release must still be the one installed (pip freeze writes name==version, as floors.txt does).
changed=$(grep -i -x -v -F -f <("$py" -m pip freeze) "$work/floors.txt" || true)
if [ -n "$changed" ]; then
  echo "floor-check: installing the wheel replaced these floor releases: $changed" >&2
  exit 1
fi

# The test tools may need newer releases of a dependency than the library does (cfn-lint needs pyyaml>=6.0.3):
# say which ones the tests therefore run on instead of the floor.
"$py" -m pip install --quiet "$wheel[dev]"
moved=$(grep -i -x -v -F -f <("$py" -m pip freeze) "$work/floors.txt" || true)
echo "floor-check: the wheel kept every floor; the dev extra moved: ${moved:-nothing}"

"$py" -m pytest -p no:cacheprovider --deselect tests/test_tiers_common.py::test_snapshot "$@"
