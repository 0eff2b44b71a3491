#!/usr/bin/env bash
# The Python and JavaScript SDKs' tests and the example processors' unit tests, natively
# (no WebAssembly): pytest in the pinned Python toolchain, `node --test` for JavaScript
# (TypeScript tests are bundled by esbuild first). Installs the toolchains when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/install-guest-toolchains.sh)"
"$EDDY_PY_TOOLCHAIN/bin/python" -m pytest -q -p no:cacheprovider sdks/python examples/*/python
EDDY_JS_TOOLCHAIN=$EDDY_JS_TOOLCHAIN node --test sdks/js/test/
EDDY_JS_TOOLCHAIN=$EDDY_JS_TOOLCHAIN node sdks/js/bin/eddy-guest-test.mjs examples/running-count/ts examples/alert-suppression/ts
