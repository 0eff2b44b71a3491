#!/usr/bin/env bash
# The Kafka demo: starts the test broker on 127.0.0.1:19092 (storage in a temporary
# directory), creates the topics, loads the freezer readings, runs
# examples/freezer-kafka, prints the output topic and stops the broker.
set -euo pipefail
cd "$(dirname "$0")/.."
eddy=${EDDY_BIN:-${CARGO_TARGET_DIR:-target}/debug/eddy}
source scripts/test-broker.sh
work=$(mktemp -d)
port=19092
trap 'kill "${broker_pid:-}" 2>/dev/null; wait "${broker_pid:-}" 2>/dev/null; rm -rf "$work"' EXIT
start_test_broker "$work" "$port"
kafka() { "$eddy" kafka --bootstrap-servers "127.0.0.1:$port" "$@"; }
kafka create-topic freezer-readings --partitions 2
kafka create-topic freezer-stats --partitions 2
cat examples/freezer-stats/input/*.jsonl | kafka produce freezer-readings --key-field unit
"$eddy" run examples/freezer-kafka/pipeline.toml --checkpoint "$work/checkpoint" --quiet
echo "--- topic freezer-stats ---"
kafka consume freezer-stats
