#!/usr/bin/env bash
# Keyed state and timers under load (release build), on the data of issue 10's Spark
# comparison: EVENTS JSON-lines events {"user","amount","ts"} (default 2 M) over KEYS
# users (default 100 k), 1 ms apart in event time, in 20 files; two files per trigger
# (10 batches), Parquet sink. Jobs:
#   running count + sum per user, update (examples/running-count);
#   a 10-second tumbling window per user, min/max/avg/count, watermark 1 minute,
#     append (examples/freezer-stats configured for it: MapState of open windows and
#     an event-time timer per window);
#   the same window job with all 20 files in one batch;
#   builtin / builtin-one: the window job on the built-in window stage ([stage.window],
#     no WebAssembly), 10 batches and one batch;
#   builtin-count: the running count + sum per user on the built-in aggregate stage
#     ([stage.aggregate], update), 10 batches.
# Prints events per second, CPU seconds, peak RSS and the time of each batch phase
# per job.
# EDDY_BIN=path runs another build;
# JOBS="count window window-one builtin builtin-one builtin-count" picks jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-pipeline.sh
EVENTS=${EVENTS:-2000000}
KEYS=${KEYS:-100000}
JOBS=${JOBS:-count window window-one builtin builtin-one builtin-count}
target=${CARGO_TARGET_DIR:-target}
eddy=${EDDY_BIN:-$target/release/eddy}
[ -n "${EDDY_BIN:-}" ] || cargo build --release -p eddy --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work/input" "$EVENTS" "$KEYS" <<'PY'
import os, random, sys
out, events, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out)
rng = random.Random(42)
per_file = events // 20
for f in range(20):
    with open(f"{out}/part-{f:04d}.jsonl", "w") as handle:
        for i in range(f * per_file, (f + 1) * per_file):
            # Event i happens i ms after 2026-11-13T08:00:00Z.
            ts = f"2026-11-13T{8 + i // 3600000:02d}:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}Z"
            handle.write(f'{{"user":"user-{rng.randrange(keys):06d}","amount":{rng.randrange(1, 100)},"ts":"{ts}"}}\n')
PY

# The [[source]] both window jobs read: MAX_FILES files per batch (all when empty).
window_source() {
  cat <<TOML
[[source]]
format = "json"
path = "input"
$([ -n "$1" ] && echo "max-files-per-trigger = $1")
max-bytes-per-trigger = "4 GiB"
schema = "user STRING, amount BIGINT, ts TIMESTAMP"
watermark = { column = "ts", delay = "1 minute" }
TOML
}

window_pipeline() {
  local file=$1 max_files=$2 operator_lines=${3:-}
  cat > "$file" <<TOML
name = "bench-window"
$(window_source "$max_files")
[operator]
module = "$PWD/build/wasm/freezer_stats.wasm"
key = ["user"]
output-mode = "append"
time-mode = "event-time"
$operator_lines
[operator.config]
window_seconds = 10
value_column = "amount"
key_name = "user"
$(parquet_sink_available_now)
TOML
}

builtin_window_pipeline() {
  local file=$1 max_files=$2
  cat > "$file" <<TOML
name = "bench-builtin-window"
$(window_source "$max_files")
[[stage]]
name = "window"
[stage.window]
time-column = "ts"
size = "10 seconds"
group-by = ["user"]
aggregates = ["min(amount) as min", "max(amount) as max", "avg(amount) as avg", "count"]
$(parquet_sink_available_now)
TOML
}

builtin_count_pipeline() {
  local file=$1
  cat > "$file" <<TOML
name = "bench-builtin-count"
$(window_source 2)
[[stage]]
name = "totals"
[stage.aggregate]
group-by = ["user"]
aggregates = ["count", "sum(amount) as total"]
output-mode = "update"
$(parquet_sink_available_now)
TOML
}

run_job() {
  local name=$1
  rm -rf "$work/checkpoint" "$work/out"
  /usr/bin/time -v "$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" --quiet 2> "$work/time.txt" || {
    cat "$work/time.txt"; exit 1; }
  local seconds cpu peak_kb batches
  seconds=$(grep "Elapsed (wall clock)" "$work/time.txt" | awk '{print $NF}' | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  # CPU time (user + system): the jobs are CPU-bound, and it varies less than the wall
  # time on a machine whose speed varies between runs.
  cpu=$(grep -E "(User|System) time \(seconds\)" "$work/time.txt" | awk '{sum += $NF} END {printf "%.1f", sum}')
  peak_kb=$(grep "Maximum resident set size" "$work/time.txt" | awk '{print $NF}')
  batches=$(( $(ls "$work/checkpoint/commits" | sort -n | tail -1) + 1 ))
  printf '%-12s %3d batches  %6.2f s  %5s k events/s  CPU %5s s  peak RSS %4d MiB  %s\n' "$name" "$batches" \
    "$seconds" "$(python3 -c "print(f'{$EVENTS / $seconds / 1e3:.0f}')")" "$cpu" "$((peak_kb / 1024))" "$(phases)"
}

# Where the batches' time went, summed over the progress records: waiting for input
# (getBatch: what the read-ahead had not decoded yet), the stages and sink (addBatch),
# the state commit (commitOffsets). On two cores the read-ahead, the commit's helper
# threads and the shards share the cores: a phase that gets faster by taking a core
# from another shows up as the other's growth.
phases() {
  python3 - "$work/checkpoint/progress" <<'PY'
import json, os, sys
total = {}
for name in os.listdir(sys.argv[1]):
    with open(os.path.join(sys.argv[1], name)) as record:
        for phase, ms in json.load(record).get("durationMs", {}).items():
            total[phase] = total.get(phase, 0) + ms
print(" ".join(f"{phase} {total.get(phase, 0) / 1000:.2f} s" for phase in ("getBatch", "addBatch", "commitOffsets")))
PY
}

# A module's first load compiles it into the module cache, once: not part of a job's time.
"$eddy" compile build/wasm/running_count.wasm build/wasm/freezer_stats.wasm > /dev/null

echo "events: $EVENTS over $KEYS keys, 1 ms apart, 20 files"
for job in $JOBS; do
  case $job in
    count) running_count_pipeline "$work/pipeline.toml" bench-count 2 'max-bytes-per-trigger = "4 GiB"'; run_job count ;;
    window) window_pipeline "$work/pipeline.toml" 2; run_job window ;;
    # One batch opens ~2 M windows (a map entry and a timer each): over the default
    # per-batch limits (64 MiB of state changes, 500 k timers per shard), so raised;
    # its changes go to the store ahead of the commit past 2 MiB a shard (peak RSS
    # ≈ 1.2 GiB with the default 128 MiB).
    window-one) window_pipeline "$work/pipeline.toml" "" $'max-state-bytes-per-batch = "2 GiB"\nmax-timers-per-batch = 4000000\nspill-state-bytes = "2 MiB"'
      run_job window-one ;;
    builtin) builtin_window_pipeline "$work/pipeline.toml" 2; run_job builtin ;;
    builtin-one) builtin_window_pipeline "$work/pipeline.toml" ""; run_job builtin-one ;;
    builtin-count) builtin_count_pipeline "$work/pipeline.toml"; run_job builtin-count ;;
    *) echo "unknown job $job"; exit 2 ;;
  esac
done
