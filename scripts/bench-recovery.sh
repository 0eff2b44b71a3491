#!/usr/bin/env bash
# Recovery of a whole query after kill -9, on a release build: running-count is fed
# KEYS distinct users (default 10 M) so that its state holds KEYS keys, then a batch of
# UPDATE events (default 2 M, over existing users) is started and the process is
# SIGKILLed KILL_AFTER seconds (default 0.5) after the batch was planned. The restart replays that batch; the script prints how
# long the restart took in all, how much of it was the replayed batch, and the rest
# (opening the store after the crash, loading the module, planning), and the restart's
# peak memory. KEEP=1 keeps the
# work directory (printed) for a closer look.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-pipeline.sh
KEYS=${KEYS:-10000000}
UPDATE=${UPDATE:-2000000}
KILL_AFTER=${KILL_AFTER:-0.5}
target=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "work directory:    $work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

python3 - "$work/input" "$KEYS" <<'PY'
import os, sys
out, keys = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
files = 20
per_file = keys // files
for f in range(files):
    with open(f"{out}/a-{f:04d}.jsonl", "w") as handle:
        handle.writelines(f'{{"user":"user-{k:09d}","amount":1}}\n' for k in range(f * per_file, (f + 1) * per_file))
PY

# Batches far bigger than the default limits (the update batch is one 2 M-event
# file): lift them, knowing the memory it takes.
running_count_pipeline "$work/pipeline.toml" bench-recovery 4 'max-bytes-per-trigger = "4 GiB"' \
  'max-state-bytes-per-batch = "4 GiB"'

cargo build --release -p eddy --quiet
eddy="$target/release/eddy"
started=$(date +%s.%N)
"$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" 2> "$work/fill.txt"
elapsed=$(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')")
echo "filled:            $KEYS keys in $elapsed s ($(grep -o '[0-9]* batches' "$work/fill.txt" | head -1))"
last=$(ls "$work/checkpoint/commits" | sort -n | tail -1)
next=$((last + 1))

python3 - "$work/input" "$KEYS" "$UPDATE" <<'PY'
import random, sys
out, keys, events = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
with open(f"{out}/b-0000.jsonl", "w") as handle:
    handle.writelines(f'{{"user":"user-{rng.randrange(keys):09d}","amount":2}}\n' for _ in range(events))
PY

"$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" 2> /dev/null &
pid=$!
until [ -f "$work/checkpoint/offsets/$next" ] || ! kill -0 "$pid" 2> /dev/null; do sleep 0.05; done
sleep "$KILL_AFTER"
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
if [ ! -f "$work/checkpoint/offsets/$next" ] || [ -f "$work/checkpoint/commits/$next" ]; then
  echo "the kill missed batch $next (planned: $([ -f "$work/checkpoint/offsets/$next" ] && echo yes || echo no)," \
       "committed: $([ -f "$work/checkpoint/commits/$next" ] && echo yes || echo no)); adjust KILL_AFTER" >&2
  exit 1
fi
echo "killed:            during batch $next ($UPDATE events), ${KILL_AFTER} s after it was planned"

started=$(date +%s.%N)
/usr/bin/time -v "$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" 2> "$work/restart.txt"
total=$(python3 -c "print($(date +%s.%N) - $started)")
peak_kb=$(grep "Maximum resident set size" "$work/restart.txt" | awk '{print $NF}')
[ -f "$work/checkpoint/commits/$next" ] || { echo "batch $next was not committed after the restart" >&2; exit 1; }
batch_ms=$(python3 -c "import json; print(json.load(open('$work/checkpoint/progress/$next.json'))['durationMs']['triggerExecution'])")
python3 - "$total" "$batch_ms" <<'PY'
import sys
total, batch = float(sys.argv[1]), float(sys.argv[2]) / 1000
print(f"restart, in all:   {total:.2f} s (until the replayed batch was committed and the run ended)")
print(f"replayed batch:    {batch:.2f} s")
print(f"recovery overhead: {total - batch:.2f} s (store open after the crash, module load, planning)")
PY
echo "peak memory (RSS): $((peak_kb / 1024)) MiB (the restart)"
