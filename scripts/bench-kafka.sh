#!/usr/bin/env bash
# Kafka end to end, release build, against the test broker (nisshi, SQLite storage):
#  1. the broker alone: produce EVENTS JSON events (default 1 M, KEYS users, default
#     100 k) into a 4-partition topic with `eddy kafka produce`, and read them back
#     with `eddy kafka consume`, each timed;
#  2. throughput: running-count from that topic to a 4-partition output topic
#     (available-now, default batch limits), events per second and peak memory;
#  3. latency: the as-fast-as-possible trigger while events arrive at RATE per second
#     (default 5 000) for LIVE_SECONDS (default 20): per input record, the time from its
#     produce timestamp to the output record of its key in the batch that read it;
#     p50 / p99.
# EDDY_BIN=path runs another build of eddy.
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${EVENTS:-1000000}
KEYS=${KEYS:-100000}
RATE=${RATE:-5000}
LIVE_SECONDS=${LIVE_SECONDS:-20}
target=${CARGO_TARGET_DIR:-target}
eddy=${EDDY_BIN:-$target/release/eddy}
[ -n "${EDDY_BIN:-}" ] || cargo build --release -p eddy --quiet
source scripts/test-broker.sh
work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
trap 'kill "${broker_pid:-}" 2>/dev/null; wait "${broker_pid:-}" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
start_test_broker "$work" "$port"
kafka() { "$eddy" kafka --bootstrap-servers "127.0.0.1:$port" "$@"; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$@"; }

python3 - "$work/events.jsonl" "$EVENTS" "$KEYS" <<'PY'
import random, sys
out, events, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(42)
with open(out, "w") as handle:
    handle.writelines(f'{{"user":"user-{rng.randrange(keys):06d}","amount":{rng.randrange(1, 100)}}}\n' for _ in range(events))
PY
kafka create-topic purchases --partitions 4
kafka create-topic totals --partitions 4
start=$(date +%s.%N); kafka produce purchases "$work/events.jsonl" --key-field user 2>/dev/null; end=$(date +%s.%N)
produce_s=$(elapsed "$start" "$end")
start=$(date +%s.%N); kafka consume purchases > /dev/null; end=$(date +%s.%N)
consume_s=$(elapsed "$start" "$end")

cat > "$work/pipeline.toml" <<TOML
name = "bench-kafka"
[[source]]
format = "kafka"
topics = ["purchases"]
starting-offsets = "earliest"
schema = "user STRING, amount BIGINT"
[source.kafka]
"bootstrap.servers" = "127.0.0.1:$port"
[trigger]
available-now = true
[operator]
module = "$PWD/build/wasm/running_count.wasm"
key = ["user"]
output-mode = "update"
[sink]
format = "kafka"
topic = "totals"
key-column = "user"
[sink.kafka]
"bootstrap.servers" = "127.0.0.1:$port"
"linger.ms" = "20"
TOML
/usr/bin/time -v "$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" --quiet 2> "$work/time.txt" || { cat "$work/time.txt"; exit 1; }
seconds=$(grep "Elapsed (wall clock)" "$work/time.txt" | awk '{print $NF}' | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
peak_kb=$(grep "Maximum resident set size" "$work/time.txt" | awk '{print $NF}')

# Latency: a fresh pair of topics, events arriving at RATE per second.
kafka create-topic live-in --partitions 4
kafka create-topic live-out --partitions 4
sed -e 's/"purchases"/"live-in"/' -e 's/"totals"/"live-out"/' -e 's/available-now = true/processing-time = "0 s"/' \
  "$work/pipeline.toml" > "$work/live.toml"
"$eddy" run "$work/live.toml" --checkpoint "$work/live-checkpoint" --quiet 2> "$work/live.log" &
eddy_pid=$!
python3 - "$RATE" "$LIVE_SECONDS" "$KEYS" <<'PY' | kafka produce live-in --key-field user
import random, sys, time
rate, seconds, keys = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
start = time.monotonic()
for i in range(rate * seconds):
    due = start + i / rate
    delay = due - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    sys.stdout.write(f'{{"user":"user-{rng.randrange(keys):06d}","amount":{rng.randrange(1, 100)}}}\n')
    if i % 50 == 0:
        sys.stdout.flush()
PY
sleep 5
kill -TERM "$eddy_pid"; wait "$eddy_pid" || true
kafka consume live-in --metadata > "$work/live-in.jsonl"
kafka consume live-out --metadata > "$work/live-out.jsonl"
latency=$(python3 - "$work/live-in.jsonl" "$work/live-out.jsonl" "$work/live-checkpoint/progress" <<'PY'
import json, os, sys
inputs = [json.loads(l) for l in open(sys.argv[1])]
outputs = [json.loads(l) for l in open(sys.argv[2])]
batches = []
for name in os.listdir(sys.argv[3]):
    record = json.load(open(os.path.join(sys.argv[3], name)))
    source = record["sources"][0]
    batches.append((record["batchId"], source.get("startOffset") or {}, source.get("endOffset") or {}))
out_time = {(int(o["headers"]["eddy.batch"]), o["key"]): o["timestamp"] for o in outputs}
latencies = []
for record in inputs:
    p, offset = str(record["partition"]), record["offset"]
    for batch, start, end in batches:
        s, e = start.get("live-in", {}).get(p, 0), end.get("live-in", {}).get(p)
        if e is not None and s <= offset < e:
            t = out_time.get((batch, record["key"]))
            if t is not None:
                latencies.append(t - record["timestamp"])
            break
latencies.sort()
if not latencies:
    print(f"no matched records ({len(inputs)} in, {len(outputs)} out, {len(batches)} batches)")
else:
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    print(f"p50 {pick(0.5)} ms, p99 {pick(0.99)} ms over {len(latencies)} of {len(inputs)} records")
PY
)
rate() { python3 -c "import sys; print(f'{int(sys.argv[1]) / float(sys.argv[2]) / 1e3:.0f} k events/s')" "$@"; }
echo "events:              $EVENTS ($KEYS keys, 4 partitions in, 4 out)"
echo "broker alone:        produce $(rate "$EVENTS" "$produce_s") (${produce_s} s), consume $(rate "$EVENTS" "$consume_s") (${consume_s} s)"
echo "eddy running-count:  $(rate "$EVENTS" "$seconds") (${seconds} s, Kafka → Kafka, exactly once)"
echo "peak memory (RSS):   $((peak_kb / 1024)) MiB"
echo "latency at $RATE/s:   $latency"
