#!/usr/bin/env bash
# Installs the Kafka-protocol broker the Kafka tests, the Kafka example and the Kafka
# benchmark run against: nisshi 0.7.0 (SQLite storage engine) from the Rust package
# registry, into a persistent directory outside the clone so a fresh clone (and CI)
# reuses it. The first install builds from source (~25 min on 2 cores).
# Prints the broker binary's path. EDDY_TOOLS_DIR overrides the directory.
set -euo pipefail

version=0.7.0
tools=${EDDY_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-tools}
root="$tools/nisshi-$version"
binary="$root/bin/nisshi"
if [ ! -x "$binary" ]; then
  echo "installing the test broker nisshi $version into $root (first time only, ~25 min)" >&2
  mkdir -p "$tools"
  build="$tools/nisshi-build"
  # The broker's crates ask for a newer Rust than ours only nominally (measured working).
  cargo install "nisshi@$version" --locked --ignore-rust-version --features libsql \
    --root "$root" --target-dir "$build" >&2
  rm -rf "$build"
fi
echo "$binary"
