#!/usr/bin/env bash
# The Kafka demo: starts the test broker on 127.0.0.1:19092 (storage in a temporary
# directory), creates the topics, loads the freezer readings, runs
# examples/freezer-kafka, prints the output topic and stops the broker.
set -euo pipefail
cd "$(dirname "$0")/.."
eddy=${EDDY_BIN:-${CARGO_TARGET_DIR:-target}/debug/eddy}
broker=$(scripts/install-kafka-broker.sh)
work=$(mktemp -d)
port=19092
(cd "$work" && exec "$broker" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
  --storage-engine "sqlite://broker.db" > broker.log 2>&1) &
broker_pid=$!
trap 'kill "$broker_pid" 2>/dev/null; wait "$broker_pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
kafka() { "$eddy" kafka --bootstrap-servers "127.0.0.1:$port" "$@"; }
kafka create-topic freezer-readings --partitions 2
kafka create-topic freezer-stats --partitions 2
cat examples/freezer-stats/input/*.jsonl | kafka produce freezer-readings --key-field unit
"$eddy" run examples/freezer-kafka/pipeline.toml --checkpoint "$work/checkpoint" --quiet
echo "--- topic freezer-stats ---"
kafka consume freezer-stats
