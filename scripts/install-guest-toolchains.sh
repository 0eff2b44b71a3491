#!/usr/bin/env bash
# Installs the toolchains that build Python and JavaScript/TypeScript processors, pinned,
# into a persistent directory outside the clone (EDDY_TOOLS_DIR, default
# ~/.cache/eddy-tools) so that a fresh clone (and CI) reuses them:
#   componentize-py-0.25.1/  a Python venv: componentize-py 0.25.1, pytest 8.3.4
#   componentize-js-0.23.0/  npm: @bytecodealliance/componentize-js 0.23.0, esbuild 0.24.2
# Installs Node.js and npm from Debian when the machine has no `node`. Prints the two
# directories as shell assignments (EDDY_PY_TOOLCHAIN=…, EDDY_JS_TOOLCHAIN=…).
set -euo pipefail

tools=${EDDY_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-tools}
py="$tools/componentize-py-0.25.1"
js="$tools/componentize-js-0.23.0"
mkdir -p "$tools"

# Python: a venv with exact versions; reinstalled only when a pin is missing.
python_pins=(componentize-py==0.25.1 pytest==8.3.4)
if [ ! -x "$py/bin/python" ]; then
  echo "creating the Python guest toolchain in $py" >&2
  python3 -m venv "$py" >&2
fi
installed=$("$py/bin/python" -m pip freeze 2>/dev/null || true)
for pin in "${python_pins[@]}"; do
  if ! grep -qix "$pin" <<<"$installed"; then
    echo "installing ${python_pins[*]} into $py" >&2
    "$py/bin/python" -m pip install --quiet --disable-pip-version-check "${python_pins[@]}" >&2
    break
  fi
done

# JavaScript: Node.js from Debian if absent, then exact npm versions.
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  echo "installing Node.js and npm from Debian" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq nodejs npm >&2
fi
mkdir -p "$js"
cat > "$js/package.json.new" <<'JSON'
{
  "private": true,
  "description": "eddy's pinned JavaScript guest toolchain",
  "dependencies": {
    "@bytecodealliance/componentize-js": "0.23.0",
    "esbuild": "0.24.2"
  }
}
JSON
if ! cmp -s "$js/package.json.new" "$js/package.json" \
  || [ ! -x "$js/node_modules/.bin/componentize-js" ] || [ ! -x "$js/node_modules/.bin/esbuild" ]; then
  echo "installing componentize-js 0.23.0 and esbuild 0.24.2 into $js" >&2
  mv "$js/package.json.new" "$js/package.json"
  (cd "$js" && npm install --no-audit --no-fund --loglevel=error >&2)
else
  rm "$js/package.json.new"
fi

echo "EDDY_PY_TOOLCHAIN=$py"
echo "EDDY_JS_TOOLCHAIN=$js"
