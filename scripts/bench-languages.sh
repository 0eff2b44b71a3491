#!/usr/bin/env bash
# Processors in Rust, Python and TypeScript side by side (release host): the first load
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

declare -A modules=([rust]=running_count [python]=running_count_py [ts]=running_count_ts)
echo "first load (compile into an empty cache, release host):"
for lang in rust python ts; do
  module="$PWD/build/wasm/${modules[$lang]}.wasm"
  cache=$(mktemp -d -p "$work")
  start=$(date +%s.%N)
  EDDY_CACHE_DIR=$cache "$eddy" compile "$module" > /dev/null 2>&1
  end=$(date +%s.%N)
  size=$(stat -c %s "$module")
  printf "  %-7s %6.1f s  (%.1f MB module)\n" "$lang" "$(echo "$end - $start" | bc)" "$(echo "$size / 1000000" | bc -l)"
  "$eddy" compile "$module" > /dev/null 2>&1   # warm the shared cache for the runs below
done

echo "rows/s through running-count ($ROWS rows in one batch):"
printf "  %-14s %12s %12s %12s\n" "rows per key" rust python ts
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
  for lang in rust python ts; do
    run="$dir/$lang"
    mkdir -p "$run"
    ln -s "$dir/input" "$run/input"
    running_count_pipeline "$run/pipeline.toml" "bench-$lang" "" 'max-bytes-per-trigger = "4 GiB"'
    sed -i "s|build/wasm/running_count.wasm|build/wasm/${modules[$lang]}.wasm|" "$run/pipeline.toml"
    "$eddy" run "$run/pipeline.toml" --checkpoint "$run/checkpoint" > /dev/null 2> "$run/stderr" || { cat "$run/stderr"; exit 1; }
    ms=$(python3 -c "import json,glob; print(sum(json.load(open(f))['durationMs']['triggerExecution'] for f in glob.glob('$run/checkpoint/progress/*.json')))")
    line+=$(printf " %12s" "$(python3 -c "print(f'{$ROWS / max($ms, 1) * 1000:,.0f}')")")
  done
  echo "$line"
done
