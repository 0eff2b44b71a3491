#!/usr/bin/env bash
# The first start over a large Kafka backlog with default settings (release build):
# RECORDS records (default 4 000) of RECORD_BYTES bytes each (default 1 MiB: 4 GB in
# all) in one single-partition topic of the test broker, read by a Kafka source with
# its default batch limits (max-bytes-per-trigger 32 MiB) through a SQL stage to JSON
# files, available-now until caught up. Prints the time, the batches it took and the
# eddy process's peak resident memory, which the default limits keep under 1 GiB.
# The records are made by Python and piped into `eddy kafka produce` (nothing of the
# backlog is written to disk but the broker's storage). EDDY_BIN=path runs another
# build of eddy; KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${RECORDS:-4000}
RECORD_BYTES=${RECORD_BYTES:-1048576}
BOUND_MIB=1024
target=${CARGO_TARGET_DIR:-target}
eddy=${EDDY_BIN:-$target/release/eddy}
[ -n "${EDDY_BIN:-}" ] || cargo build --release -p eddy --quiet
source scripts/test-broker.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/eddy-kafka-backlog.XXXXXX")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
trap 'kill "${broker_pid:-}" 2>/dev/null; wait "${broker_pid:-}" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
start_test_broker "$work" "$port"
# Records above librdkafka's default message.max.bytes (1 000 000) need a larger one.
kafka() { "$eddy" kafka --bootstrap-servers "127.0.0.1:$port" --property message.max.bytes=8388608 "$@"; }

kafka create-topic backlog --partitions 1
start=$(date +%s)
python3 - "$RECORDS" "$RECORD_BYTES" <<'PY' | kafka produce backlog 2>/dev/null
import sys
records, size = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout
for i in range(records):
    head = f'{{"id":{i},"pad":"'
    out.write(head + "x" * (size - len(head) - 2) + '"}\n')
PY
produce_s=$(( $(date +%s) - start ))

cat > "$work/pipeline.toml" <<TOML
name = "bench-kafka-backlog"
[[source]]
format = "kafka"
topics = ["backlog"]
starting-offsets = "earliest"
schema = "id BIGINT, pad STRING"
[source.kafka]
"bootstrap.servers" = "127.0.0.1:$port"
[trigger]
available-now = true
[[stage]]
sql = "SELECT id, length(pad) AS len FROM input"
[sink]
format = "json"
path = "$work/out"
TOML
/usr/bin/time -v "$eddy" run "$work/pipeline.toml" --checkpoint "$work/checkpoint" --quiet 2> "$work/time.txt" \
  || { cat "$work/time.txt"; exit 1; }
seconds=$(grep "Elapsed (wall clock)" "$work/time.txt" | awk '{print $NF}' | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
peak_kb=$(grep "Maximum resident set size" "$work/time.txt" | awk '{print $NF}')
rows=$(cat "$work/out"/part-* | wc -l)
batches=$(ls "$work/checkpoint/commits" | wc -l)
[ "$rows" -eq "$RECORDS" ] || { echo "expected $RECORDS output rows, found $rows" >&2; exit 1; }
echo "backlog:             $RECORDS records of $RECORD_BYTES bytes ($(( RECORDS * RECORD_BYTES / 1000000 )) MB) in one partition (produced in ${produce_s} s)"
echo "eddy, defaults:      ${seconds} s, $batches batches, every record once"
echo "peak memory (RSS):   $(( peak_kb / 1024 )) MiB (documented bound: $BOUND_MIB MiB)"
[ "$(( peak_kb / 1024 ))" -lt "$BOUND_MIB" ] || { echo "over the documented bound" >&2; exit 1; }
