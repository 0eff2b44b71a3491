#!/usr/bin/env bash
# Installs what eddy's build needs and a fresh machine lacks: the Debian packages for
# RocksDB's bindings (libclang-dev), native builds (cmake, libcurl4-openssl-dev; librdkafka's
# TLS and compression: libssl-dev, zlib1g-dev), the
# benchmark scripts (python3, time), the dashboard's browser test (chromium), and the
# wasm32-wasip2 Rust target for processor components. Does nothing when all is there.
set -euo pipefail

packages=(libclang-dev cmake libcurl4-openssl-dev libssl-dev zlib1g-dev python3 time chromium)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  echo "adding the Rust target wasm32-wasip2"
  rustup target add wasm32-wasip2
fi
