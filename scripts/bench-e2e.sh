#!/usr/bin/env bash
# End-to-end throughput of a release build: EVENTS JSON-lines purchase events
# (default 2 M) over KEYS users (default 100 k) in FILES files, read by a file source
# (all in one batch by default, as Spark does without maxFilesPerTrigger — the
# script lifts max-bytes-per-trigger for that; MAX_FILES=4 makes 5 batches of 400 k), through the running-count processor, to a Parquet sink.
# Prints events per second and the peak resident memory of the eddy process.
# METRICS=1 runs it with the monitoring endpoint on (`--metrics 127.0.0.1:0`);
# EDDY_BIN=path runs another build of eddy (to compare two versions in one session).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-pipeline.sh
EVENTS=${EVENTS:-2000000}
KEYS=${KEYS:-100000}
FILES=${FILES:-20}
MAX_FILES=${MAX_FILES:-}
target=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work/input" "$EVENTS" "$KEYS" "$FILES" <<'PY'
import os, random, sys
out, events, keys, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out)
rng = random.Random(42)
per_file = events // files
for f in range(files):
    lines = [f'{{"user":"user-{rng.randrange(keys):06d}","amount":{rng.randrange(1, 100)}}}\n' for _ in range(per_file)]
    with open(f"{out}/part-{f:04d}.jsonl", "w") as handle:
        handle.writelines(lines)
PY

running_count_pipeline "$work/pipeline.toml" bench-e2e "$MAX_FILES" 'max-bytes-per-trigger = "4 GiB"'

eddy=${EDDY_BIN:-$target/release/eddy}
[ -n "${EDDY_BIN:-}" ] || cargo build --release -p eddy --quiet
extra=()
[ -z "${METRICS:-}" ] || extra=(--metrics 127.0.0.1:0)
input_bytes=$(du -sb "$work/input" | cut -f1)
/usr/bin/time -v "$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" "${extra[@]}" 2> "$work/time.txt" || {
  cat "$work/time.txt"; exit 1; }
seconds=$(grep "Elapsed (wall clock)" "$work/time.txt" | awk '{print $NF}' | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
peak_kb=$(grep "Maximum resident set size" "$work/time.txt" | awk '{print $NF}')
output_rows=$(grep -o "[0-9]* output rows" "$work/time.txt" | awk '{print $1}')
echo "events:            $EVENTS ($KEYS keys, $FILES files, ${MAX_FILES:-all} files per batch, $((input_bytes / 1048576)) MiB of JSON)${METRICS:+, metrics on}"
echo "output rows:       $output_rows (Parquet)"
echo "wall time:         ${seconds} s"
echo "throughput:        $(python3 -c "print(f'{$EVENTS / $seconds / 1e6:.2f} M events/s')")"
echo "peak memory (RSS): $((peak_kb / 1024)) MiB"
