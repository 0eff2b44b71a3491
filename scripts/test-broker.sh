# Sourced by the Kafka scripts. start_test_broker DIR PORT starts the test broker
# (installed by scripts/install-kafka-broker.sh) on 127.0.0.1:PORT with its SQLite
# storage and log in DIR, sets broker_pid, and waits until it listens.
start_test_broker() {
  local dir=$1 port=$2 broker
  broker=$(scripts/install-kafka-broker.sh)
  # nisshi opens a sqlite:// path relative to its working directory.
  (cd "$dir" && exec "$broker" broker --listener-url "tcp://127.0.0.1:$port" \
    --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine "sqlite://broker.db" > broker.log 2>&1) &
  broker_pid=$!
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "the test broker did not listen on port $port within 10 s:" >&2
  cat "$dir/broker.log" >&2
  return 1
}
