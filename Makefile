# eddy — build, demo, test, bench. Every target installs what a fresh machine lacks.
#
# CARGO_TARGET_DIR may point outside the clone (CI keeps a persistent one).
CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TARGET_DIR

# Guest crates built to WebAssembly components, and the files they produce.
GUEST_CRATES := running-count alert-suppression freezer-stats scripted noop boundary-probe future-contract
GUEST_WASM   := running_count alert_suppression freezer_stats scripted noop boundary_probe future_contract
WASM_DIR     := build/wasm

.SECONDEXPANSION:

.PHONY: deps broker toolchains guests guests-languages sdk-tests build demo demo-kafka test bench bench-e2e bench-recovery bench-kafka bench-kafka-backlog bench-window bench-languages clean

deps:
	@scripts/install-deps.sh

# The Kafka-protocol broker the Kafka tests and demo run against, installed once into
# a cache directory outside the clone (~25 min the first time).
broker: deps
	@scripts/install-kafka-broker.sh > /dev/null

# The pinned Python and JavaScript guest toolchains (componentize-py, componentize-js,
# esbuild, pytest), installed once into a cache directory outside the clone.
toolchains: deps
	@scripts/install-guest-toolchains.sh > /dev/null

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

# The examples written in Python and TypeScript, built by `eddy build`.
EDDY := $(CARGO_TARGET_DIR)/debug/eddy
PY_SDK := $(shell find sdks/python/eddy_guest -name '*.py' -o -name '*.toml' 2>/dev/null)
JS_SDK := $(shell find sdks/js/src sdks/js/bin sdks/js/wit -type f 2>/dev/null)
LANGUAGE_WASM := $(foreach example,running_count alert_suppression,$(WASM_DIR)/$(example)_py.wasm $(WASM_DIR)/$(example)_ts.wasm) \
                 $(WASM_DIR)/failing_py.wasm $(WASM_DIR)/failing_ts.wasm

guests-languages: toolchains build $(LANGUAGE_WASM)

$(WASM_DIR)/%_py.wasm: examples/$$(subst _,-,$$*)/python/app.py $(PY_SDK) | $(EDDY)
	$(EDDY) build examples/$(subst _,-,$*)/python -o $@

$(WASM_DIR)/%_ts.wasm: examples/$$(subst _,-,$$*)/ts/app.ts $(JS_SDK) | $(EDDY)
	$(EDDY) build examples/$(subst _,-,$*)/ts -o $@

# Processors that raise, for the error-reporting tests.
$(WASM_DIR)/failing_py.wasm: tests/guests/failing-python/app.py $(PY_SDK) | $(EDDY)
	$(EDDY) build tests/guests/failing-python -o $@

$(WASM_DIR)/failing_ts.wasm: tests/guests/failing-ts/app.ts $(JS_SDK) | $(EDDY)
	$(EDDY) build tests/guests/failing-ts -o $@

# The SDKs' own tests and the examples' unit tests: pytest and node --test.
sdk-tests: toolchains
	scripts/test-sdks.sh

demo: guests build
	$(CARGO_TARGET_DIR)/debug/eddy run examples/running-count/pipeline.toml

demo-kafka: guests build broker
	scripts/demo-kafka.sh

test: guests build broker guests-languages sdk-tests
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

bench-kafka-backlog: broker
	scripts/bench-kafka-backlog.sh

bench-window: guests
	scripts/bench-window.sh

bench-languages: guests guests-languages
	scripts/bench-languages.sh

clean:
	rm -rf build
