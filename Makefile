# eddy — build, demo, test, bench. Every target installs what a fresh machine lacks.
#
# CARGO_TARGET_DIR may point outside the clone (CI keeps a persistent one).
CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TARGET_DIR

# Guest crates built to WebAssembly components, and the files they produce.
GUEST_CRATES := running-count alert-suppression freezer-stats scripted noop boundary-probe future-contract
GUEST_WASM   := running_count alert_suppression freezer_stats scripted noop boundary_probe future_contract
WASM_DIR     := build/wasm

.PHONY: deps broker guests build demo demo-kafka test bench bench-e2e bench-recovery bench-kafka bench-window clean

deps:
	@scripts/install-deps.sh

# The Kafka-protocol broker the Kafka tests and demo run against, installed once into
# a cache directory outside the clone (~25 min the first time).
broker: deps
	@scripts/install-kafka-broker.sh > /dev/null

guests: deps
	cargo build --release --target wasm32-wasip2 $(addprefix -p ,$(GUEST_CRATES))
	@mkdir -p $(WASM_DIR)
	@for name in $(GUEST_WASM); do cp $(CARGO_TARGET_DIR)/wasm32-wasip2/release/$$name.wasm $(WASM_DIR)/; done
	@# A processor with a bug and its fix (two builds of one crate) for the failure tests.
	cargo build --release --target wasm32-wasip2 -p invoice-totals
	@cp $(CARGO_TARGET_DIR)/wasm32-wasip2/release/invoice_totals.wasm $(WASM_DIR)/invoice_totals_buggy.wasm
	cargo build --release --target wasm32-wasip2 -p invoice-totals --features fixed
	@cp $(CARGO_TARGET_DIR)/wasm32-wasip2/release/invoice_totals.wasm $(WASM_DIR)/invoice_totals_fixed.wasm
	@echo "guests built into $(WASM_DIR)/"

build: deps
	cargo build -p eddy

demo: guests build
	$(CARGO_TARGET_DIR)/debug/eddy run examples/running-count/pipeline.toml

demo-kafka: guests build broker
	scripts/demo-kafka.sh

test: guests build broker
	EDDY_KAFKA_BROKER="$$(scripts/install-kafka-broker.sh)" cargo test --workspace

bench: guests
	cargo bench -p eddy
	scripts/bench-e2e.sh

bench-e2e: guests
	scripts/bench-e2e.sh

bench-recovery: guests
	scripts/bench-recovery.sh

bench-kafka: guests broker
	scripts/bench-kafka.sh

bench-window: guests
	scripts/bench-window.sh

clean:
	rm -rf build
