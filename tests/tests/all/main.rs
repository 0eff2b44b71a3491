//! eddy's end-to-end tests: one module per concern, all linked into one test binary,
//! so that RocksDB, wasmtime and DataFusion are linked once rather than once a file.

mod aggregate_stage;
mod bounded_batches;
mod chain_torture;
mod compatibility;
mod conformance;
mod dashboard;
mod engine;
mod failure_containment;
mod freezer;
mod graceful_stop;
mod guest_failures;
mod guest_languages;
mod guest_limits;
mod kafka;
mod kafka_layout_torture;
mod kafka_records;
mod kafka_sink_reruns;
mod kafka_torture;
mod memory_bounds;
mod module_cache;
mod monitor_abuse;
mod output_layout;
mod pipeline_run;
mod projects;
mod sandbox;
mod spark_watermark_rules;
mod stage_examples;
mod stages;
mod state_and_timers;
mod state_reader;
mod static_table_replay;
mod torture;
