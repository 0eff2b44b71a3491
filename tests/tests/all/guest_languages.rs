//! Processors written in Python and TypeScript, built from the repo's examples by
//! `eddy build` with the pinned toolchains (`make guests-languages`): they print what
//! the Rust examples print, continue each other's checkpoints (the SDKs write the same
//! CBOR), and a handler's exception reaches the user with its message, key and stack.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use eddy_tests::{eddy_bin, repo_root, wasm};

/// The languages besides Rust, by the suffix of their example modules.
const LANGUAGES: [&str; 2] = ["py", "ts"];

fn eddy(args: &[&str]) -> Output {
    Command::new(eddy_bin()).args(args).output().expect("eddy runs")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "eddy failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

fn example(name: &str) -> PathBuf {
    repo_root().join("examples").join(name)
}

fn language_dir(suffix: &str) -> &'static str {
    if suffix == "py" { "python" } else { "ts" }
}

#[test]
fn python_and_typescript_examples_print_what_the_rust_examples_print() {
    for name in ["running-count", "alert-suppression"] {
        let expected = std::fs::read_to_string(example(name).join("expected-output.txt")).expect("expected output");
        for suffix in LANGUAGES {
            let spec = example(name).join(language_dir(suffix)).join("pipeline.toml");
            let module = wasm(&format!("{}_{suffix}", name.replace('-', "_")));
            let spec_text = std::fs::read_to_string(&spec).expect("spec");
            assert!(
                spec_text.contains(module.file_name().and_then(|f| f.to_str()).expect("name")),
                "{} runs {}",
                spec.display(),
                module.display()
            );
            let printed = stdout(&eddy(&["run", spec.to_str().expect("path")]));
            assert_eq!(printed, expected, "{name} in {suffix}");
        }
    }
}

/// A copy of example `name`'s pipeline running `module`, over an input directory the
/// test fills file by file.
fn staged_pipeline(dir: &Path, name: &str, module: &Path) -> PathBuf {
    let text = std::fs::read_to_string(example(name).join("pipeline.toml")).expect("spec");
    let text: String = text
        .lines()
        .map(|line| {
            if line.starts_with("module = ") { format!("module = \"{}\"", module.display()) } else { line.to_string() }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let spec = dir.join(format!("{}.toml", module.file_stem().and_then(|s| s.to_str()).expect("stem")));
    std::fs::write(&spec, text).expect("spec");
    spec
}

/// Runs example `name` with module `first` over its first input file and `second` over
/// the rest, on one checkpoint; returns both runs' output.
fn continue_in_another_language(name: &str, first: &str, second: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(example(name).join("input"))
        .expect("input")
        .map(|entry| entry.expect("entry").path())
        .collect();
    inputs.sort();
    let mut printed = String::new();
    for (module, files) in [(first, &inputs[..1]), (second, &inputs[1..])] {
        let spec = staged_pipeline(dir.path(), name, &wasm(module));
        for file in files {
            std::fs::copy(file, dir.path().join("input").join(file.file_name().expect("name"))).expect("copy");
        }
        printed +=
            &stdout(&eddy(&["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]));
    }
    // A Rust module that never lists its timers keeps them in the timer index only; the
    // Python and TypeScript modules import list-timers, so their timers are also kept
    // by key: the second run converted the first's.
    let (by_key, indexed) = stored_timers(&checkpoint);
    if second.ends_with("_py") || second.ends_with("_ts") {
        assert_eq!(by_key, indexed, "{first} then {second}: every timer kept by key");
    } else {
        assert!(by_key.is_empty(), "{first} then {second}: no timer kept by key");
    }
    printed
}

/// Timers as (key, expiry).
type TimerSet = BTreeSet<(Vec<u8>, i64)>;

/// A checkpoint's timers, as kept by key and as in its timer index.
fn stored_timers(checkpoint: &Path) -> (TimerSet, TimerSet) {
    use eddy::state::{Cf, StateStore, layout};
    let store = StateStore::open(&eddy::checkpoint::CheckpointDir::new(checkpoint).store_dir()).expect("store");
    let txn = store.begin();
    let by_key = txn.scan_prefix(Cf::Timers, &[]).expect("timers").into_iter().map(|(raw, _)| {
        let (_, _, key, rest) = layout::split_key_prefix(&raw).expect("a timer key");
        (key.to_vec(), layout::from_sortable_i64(rest).expect("an expiry"))
    });
    let index = txn.scan_prefix(Cf::TimerIndex, &[]).expect("timer index");
    let indexed = index.iter().flat_map(|(raw, value)| {
        let timers = eddy::state::timer_buckets::entry_timers(raw, value).expect("an index entry");
        timers.into_iter().map(|(expiry, _, key)| (key, expiry))
    });
    (by_key.collect(), indexed.collect())
}

#[test]
fn a_checkpoint_written_in_one_language_is_continued_in_another() {
    for name in ["running-count", "alert-suppression"] {
        let expected = std::fs::read_to_string(example(name).join("expected-output.txt")).expect("expected output");
        let rust = name.replace('-', "_");
        let python = format!("{rust}_py");
        let typescript = format!("{rust}_ts");
        for (first, second) in [
            (&python, &rust),
            (&rust, &python),
            (&typescript, &rust),
            (&rust, &typescript),
            (&python, &typescript),
            (&typescript, &python),
        ] {
            assert_eq!(continue_in_another_language(name, first, second), expected, "{name}: {first} then {second}");
        }
    }
}

#[test]
fn an_exception_in_a_handler_reaches_the_user_with_its_message_key_and_stack() {
    for (module, message, frame) in [
        ("failing_py", "ValueError: negative amount -5 for mallory", "check_amount"),
        ("failing_ts", "RangeError: negative amount -5 for mallory", "checkAmount"),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = staged_pipeline(dir.path(), "running-count", &wasm(module));
        std::fs::write(
            dir.path().join("input/purchases.jsonl"),
            "{\"user\":\"alice\",\"amount\":5}\n{\"user\":\"mallory\",\"amount\":-5}\n",
        )
        .expect("input");
        let checkpoint = dir.path().join("checkpoint");
        let output = eddy(&["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]);
        assert!(!output.status.success(), "{module} must fail the batch");
        let error = String::from_utf8_lossy(&output.stderr);
        for part in [&format!("module '{module}.wasm'"), "handle-input-rows", "[\"mallory\"]", message, frame] {
            assert!(error.contains(part), "{module}: the error lacks {part:?}:\n{error}");
        }
        let store = eddy::state::StateStore::open(&eddy::checkpoint::CheckpointDir::new(&checkpoint).store_dir())
            .expect("store");
        assert_eq!(store.committed_batch().expect("readable"), None, "{module}: nothing is committed");
    }
}
