# Sourced by the tools' setup.sh scripts: one way to install a pinned tool into its own venv.
# tool_venv DIR [FILE ...] [-- SCRIPT ARG ...]: (re)create DIR/.venv from DIR/requirements.txt with --require-hashes
# (never into the package's own environment), then run SCRIPT with the venv's python, unless the venv's stamp (a
# hash of requirements.txt and the FILEs) says that was already done. Sets venv=DIR/.venv for the caller.
tool_venv() {
  local dir=$1
  shift
  local hashed=("$dir/requirements.txt")
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    hashed+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift
  venv="$dir/.venv"
  local stamp
  stamp="$venv/.installed-$(cat "${hashed[@]}" | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$dir/requirements.txt"
    if [ $# -gt 0 ]; then
      "$venv/bin/python" "$@"
    fi
    touch "$stamp"
  fi
}
