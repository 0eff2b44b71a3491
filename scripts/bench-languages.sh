#!/usr/bin/env bash
# Processors in Rust, Python and TypeScript (StarlingMonkey and QuickJS) side by side (release host): the first load
# of each running-count module (compiled into an empty module cache, `eddy compile`),
# then rows per second through running-count at 1, 100 and 10 000 rows per key
# (ROWS rows in one batch, default 100 000; warm cache). The time is the batch's
# `triggerExecution` from its progress record (decode, processor calls, sink, commit),
# so start-up is not counted. EDDY_BIN=path runs another build of eddy.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-pipeline.sh
ROWS=${ROWS:-100000}
target=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
eddy=${EDDY_BIN:-$target/release/eddy}
[ -n "${EDDY_BIN:-}" ] || cargo build --release -p eddy --quiet

# TypeScript twice: on StarlingMonkey (`eddy build`'s default) and on QuickJS (--quickjs).
"$eddy" build examples/running-count/ts --quickjs -o "$work/running_count_qjs.wasm" > /dev/null 2>&1
declare -A modules=([rust]=$PWD/build/wasm/running_count.wasm [python]=$PWD/build/wasm/running_count_py.wasm
  [ts]=$PWD/build/wasm/running_count_ts.wasm [ts-quickjs]=$work/running_count_qjs.wasm)
languages=(rust python ts ts-quickjs)
echo "first load (compile into an empty cache, release host):"
for lang in "${languages[@]}"; do
  module=${modules[$lang]}
  cache=$(mktemp -d -p "$work")
  start=$(date +%s.%N)
  EDDY_CACHE_DIR=$cache "$eddy" compile "$module" > /dev/null 2>&1
  end=$(date +%s.%N)
  size=$(stat -c %s "$module")
  python3 -c "print(f'  {\"$lang\":<10} {$end - $start:6.1f} s  ({$size / 1e6:.1f} MB module)')"
  "$eddy" compile "$module" > /dev/null 2>&1   # warm the shared cache for the runs below
done

echo "rows/s through running-count ($ROWS rows in one batch):"
printf "  %-14s %12s %12s %12s %12s\n" "rows per key" "${languages[@]}"
for per_key in 1 100 10000; do
  dir="$work/rows-$per_key"
  mkdir -p "$dir/input"
  python3 - "$dir/input/part-0000.jsonl" "$ROWS" "$per_key" <<'PY'
import random, sys
path, rows, per_key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
keys = max(1, rows // per_key)
order = [k for k in range(keys) for _ in range(per_key)][:rows]
random.Random(7).shuffle(order)
with open(path, "w") as out:
    out.writelines(f'{{"user":"user-{k:06d}","amount":{k % 97}}}\n' for k in order)
PY
  line=$(printf "  %-14s" "$per_key")
  for lang in "${languages[@]}"; do
    run="$dir/$lang"
    mkdir -p "$run"
    ln -s "$dir/input" "$run/input"
    running_count_pipeline "$run/pipeline.toml" "bench-$lang" "" 'max-bytes-per-trigger = "4 GiB"'
    sed -i "s|$PWD/build/wasm/running_count.wasm|${modules[$lang]}|" "$run/pipeline.toml"
    "$eddy" run "$run/pipeline.toml" --checkpoint "$run/checkpoint" > /dev/null 2> "$run/stderr" || { cat "$run/stderr"; exit 1; }
    ms=$(python3 -c "import json,glob; print(sum(json.load(open(f))['durationMs']['triggerExecution'] for f in glob.glob('$run/checkpoint/progress/*.json')))")
    line+=$(printf " %12s" "$(python3 -c "print(f'{$ROWS / max($ms, 1) * 1000:,.0f}')")")
  done
  echo "$line"
done
