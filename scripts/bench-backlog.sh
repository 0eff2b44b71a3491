#!/usr/bin/env bash
# The first start over a large backlog with default settings (release build): GB
# gigabytes (default 2) of JSON-lines purchase events over KEYS users (default 100 k)
# in 64 MiB files, read by a file source with its default batch limits (32 MiB a
# batch) through running-count to Parquet, as-fast-as-possible until caught up
# (available-now). Prints events per second, the batches it took and the eddy
# process's peak resident memory, which the default limits keep under 1 GiB.
# EDDY_BIN=path runs another build of eddy.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-pipeline.sh
GB=${GB:-2}
KEYS=${KEYS:-100000}
target=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d "${TMPDIR:-/tmp}/eddy-backlog.XXXXXX")
trap 'rm -rf "$work"' EXIT

events=$(python3 - "$work/input" "$GB" "$KEYS" <<'PY'
import os, random, sys
out, gb, keys = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
os.makedirs(out)
rng = random.Random(42)
total, events, part, file_bytes = int(gb * 1e9), 0, 0, 64 << 20
lines = [f'{{"user":"user-{rng.randrange(keys):06d}","amount":{rng.randrange(1, 100)}}}\n' for _ in range(1 << 16)]
written = 0
while written < total:
    with open(f"{out}/part-{part:05d}.jsonl", "w") as handle:
        size = 0
        while size < file_bytes and written < total:
            chunk = "".join(rng.sample(lines, 4096))
            handle.write(chunk)
            size += len(chunk)
            written += len(chunk)
            events += 4096
    part += 1
print(events)
PY
)

running_count_pipeline "$work/pipeline.toml" bench-backlog
eddy=${EDDY_BIN:-$target/release/eddy}
[ -n "${EDDY_BIN:-}" ] || cargo build --release -p eddy --quiet
/usr/bin/time -v "$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" --quiet 2> "$work/time.txt" || {
  cat "$work/time.txt"; exit 1; }
seconds=$(grep "Elapsed (wall clock)" "$work/time.txt" | awk '{print $NF}' | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
peak_kb=$(grep "Maximum resident set size" "$work/time.txt" | awk '{print $NF}')
batches=$(( $(ls "$work/checkpoint/commits" | sort -n | tail -1) + 1 ))
echo "backlog:           $((($(du -sb "$work/input" | cut -f1)) / 1048576)) MiB of JSON lines, $events events over $KEYS keys"
echo "batches:           $batches (default max-bytes-per-trigger)"
echo "wall time:         ${seconds} s"
echo "throughput:        $(python3 -c "print(f'{$events / $seconds / 1e6:.2f} M events/s')")"
echo "peak memory (RSS): $((peak_kb / 1024)) MiB (bound: 1024 MiB)"
