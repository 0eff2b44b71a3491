//! `eddy run` end to end: the running-count example against a reference computation,
//! state kept across runs, and clear errors for bad specs and bad records.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use eddy_tests::{eddy_bin, repo_root};

fn eddy(args: &[&str]) -> Output {
    Command::new(eddy_bin()).args(args).env("EDDY_LOG", "warn").output().expect("eddy runs")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "eddy failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

fn stderr(output: &Output) -> String {
    assert!(!output.status.success(), "eddy should have failed");
    String::from_utf8(output.stderr.clone()).expect("utf-8 output")
}

/// The console sink's tables: batch id → set of rows (cells as text).
fn console_batches(text: &str) -> BTreeMap<u64, BTreeSet<Vec<String>>> {
    let mut batches = BTreeMap::new();
    let mut current = None;
    let mut header_seen = false;
    for line in text.lines() {
        if let Some(id) = line.strip_prefix("Batch: ") {
            current = Some(id.trim().parse::<u64>().expect("batch id"));
            batches.insert(current.expect("set"), BTreeSet::new());
            header_seen = false;
        } else if line.starts_with('|') {
            let cells: Vec<String> = line.trim_matches('|').split('|').map(|cell| cell.trim().to_string()).collect();
            if header_seen {
                batches.get_mut(&current.expect("a table follows a batch header")).expect("batch").insert(cells);
            } else {
                header_seen = true;
            }
        }
    }
    batches
}

/// The running-count result computed directly from the input files: per file (batch),
/// the cumulative (count, sum) of every user that appears in it.
fn reference(input_dir: &Path) -> BTreeMap<u64, BTreeSet<Vec<String>>> {
    let mut files: Vec<_> =
        std::fs::read_dir(input_dir).expect("input dir").map(|e| e.expect("entry").path()).collect();
    files.sort();
    let mut totals: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut batches = BTreeMap::new();
    for (batch, file) in files.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for line in std::fs::read_to_string(file).expect("input").lines() {
            let record: serde_json::Value = serde_json::from_str(line).expect("json");
            let user = record["user"].as_str().expect("user").to_string();
            let entry = totals.entry(user.clone()).or_default();
            entry.0 += 1;
            entry.1 += record["amount"].as_i64().expect("amount");
            seen.insert(user);
        }
        let rows = seen
            .iter()
            .map(|user| vec![user.clone(), totals[user].0.to_string(), totals[user].1.to_string()])
            .collect();
        batches.insert(batch as u64, rows);
    }
    batches
}

#[test]
fn running_count_matches_a_reference_computation() {
    let example = repo_root().join("examples/running-count");
    let output = eddy(&["run", example.join("pipeline.toml").to_str().expect("path")]);
    let printed = console_batches(&stdout(&output));
    assert_eq!(printed, reference(&example.join("input")));
    assert_eq!(printed.len(), 3, "one batch per input file");
}

#[test]
fn state_carries_over_to_files_that_arrive_later() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("input");
    std::fs::create_dir(&input).expect("input dir");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"user STRING, amount BIGINT\"\n\n\
         [operator]\nmodule = {:?}\nkey = [\"user\"]\noutput-mode = \"update\"\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n",
        wasm.to_str().expect("path")
    );
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(&pipeline, spec).expect("spec");
    let checkpoint = dir.path().join("checkpoint");
    let run = || {
        stdout(&eddy(&["run", pipeline.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]))
    };

    std::fs::write(input.join("a.jsonl"), "{\"user\":\"u1\",\"amount\":5}\n{\"user\":\"u2\",\"amount\":1}\n")
        .expect("file");
    run();
    // Nothing new: a second run processes nothing and writes no part file.
    run();
    std::fs::write(input.join("b.jsonl"), "{\"user\":\"u1\",\"amount\":10}\n").expect("file");
    run();

    let out = dir.path().join("out");
    let mut parts: Vec<String> = std::fs::read_dir(&out)
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    parts.sort();
    assert_eq!(parts, vec!["_eddy_query", "part-00000.jsonl", "part-00001.jsonl"], "the parts and the owner marker");
    let second = std::fs::read_to_string(out.join("part-00001.jsonl")).expect("part");
    assert_eq!(second, "{\"user\":\"u1\",\"count\":2,\"sum\":15}\n");
}

#[test]
fn a_new_checkpoint_cannot_take_over_another_query_s_output_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = write_spec(
        dir.path(),
        &format!("{}\n[sink]\nformat = \"json\"\npath = \"out\"\n", valid_spec(wasm.to_str().expect("path"))),
    );
    std::fs::write(dir.path().join("input/a.jsonl"), "{\"user\":\"u1\",\"amount\":5}\n").expect("file");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let ran = eddy(&["run", &spec, "--checkpoint", first.to_str().expect("path")]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    let part = dir.path().join("out/part-00000.jsonl");
    let written = std::fs::read_to_string(&part).expect("part");
    // The same query restarted is fine; a new checkpoint over the same output is refused.
    assert!(eddy(&["run", &spec, "--checkpoint", first.to_str().expect("path")]).status.success());
    let message = stderr(&eddy(&["run", &spec, "--checkpoint", second.to_str().expect("path")]));
    let out = dir.path().join("out");
    assert!(
        message.starts_with(&format!("error: the sink directory {} holds the output of another query", out.display())),
        "{message}"
    );
    assert!(message.contains(&format!("checkpoint {})", first.display())), "names the owner's checkpoint: {message}");
    assert!(message.contains(&format!("checkpoint {})", second.display())), "names this one: {message}");
    assert!(message.contains("Point [sink] path at another directory"), "{message}");
    assert_eq!(std::fs::read_to_string(&part).expect("part"), written, "nothing replaced");
}

fn write_spec(dir: &Path, spec: &str) -> String {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, spec).expect("spec");
    path.to_str().expect("path").to_string()
}

fn valid_spec(module: &str) -> String {
    format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"user STRING, amount BIGINT\"\n\n\
         [operator]\nmodule = {module:?}\nkey = [\"user\"]\n\n[trigger]\navailable-now = true\n"
    )
}

#[test]
fn bad_specs_name_the_file_line_and_what_is_expected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let wasm = wasm.to_str().expect("path");

    let spec = write_spec(dir.path(), &valid_spec(wasm).replace("key = [\"user\"]", "key = [\"user\"]\nparallel = 4"));
    assert_eq!(
        stderr(&eddy(&["run", &spec])),
        format!(
            "error: {spec}:9: operator.parallel: unknown field `parallel`, expected one of `module`, `key`, `output-mode`, `time-mode`, `key-groups`, `parallelism`, `memory-limit-mb`, `call-timeout-ms`, `max-state-bytes-per-batch`, `spill-state-bytes`, `max-timers-per-batch`, `max-state-value-bytes`, `max-output-rows-per-call`, `max-output-bytes-per-call`, `max-output-rows-per-batch`, `max-output-bytes-per-batch`, `max-log-bytes-per-call`, `config`, `initial-state`\n"
        )
    );

    let spec = write_spec(dir.path(), &valid_spec("missing.wasm"));
    let missing = dir.path().join("missing.wasm");
    assert_eq!(
        stderr(&eddy(&["run", &spec])),
        format!(
            "error: {spec}:7: operator.module: {} does not exist; build the processor first (for the examples: `make guests`)\n",
            missing.display()
        )
    );

    let spec = write_spec(dir.path(), &valid_spec(wasm).replace("key = [\"user\"]", "key = [\"customer\"]"));
    assert_eq!(
        stderr(&eddy(&["run", &spec])),
        format!(
            "error: {spec}:8: operator.key: key column 'customer' is not in source.schema (columns: user, amount)\n"
        )
    );

    let spec = write_spec(dir.path(), &valid_spec(wasm).replace("amount BIGINT", "amount MONEY"));
    assert_eq!(
        stderr(&eddy(&["run", &spec])),
        format!(
            "error: {spec}:4: source[0].schema: column 2 ('amount MONEY'): unknown type MONEY; use one of STRING, BIGINT, DOUBLE, BOOLEAN, BINARY, TIMESTAMP\n"
        )
    );

    let with_dead_letters = "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"user STRING, amount BIGINT\"\n\
                             on-bad-record = \"dead-letter\"\ndead-letter-path = \"bad\"\n\n";
    let two_sources = format!(
        "{with_dead_letters}{}",
        valid_spec(wasm).replace(
            "[[source]]",
            "[[source]]\nname = \"late\"\non-bad-record = \"dead-letter\"\ndead-letter-path = \"bad\""
        )
    );
    let spec = write_spec(dir.path(), &two_sources);
    assert_eq!(
        stderr(&eddy(&["run", &spec])),
        format!(
            "error: {spec}:11: source[1].dead-letter-path: source 'source-0' already writes its dead letters to {}; give each source its own directory\n",
            dir.path().join("bad").display()
        )
    );
}

#[test]
fn a_bad_record_names_its_file_and_line_and_commits_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = write_spec(dir.path(), &valid_spec(wasm.to_str().expect("path")));
    let bad = dir.path().join("input/a.jsonl");
    std::fs::write(&bad, "{\"user\":\"u1\",\"amount\":5}\n{\"user\":\"u2\",\"amount\":\"five\"}\n").expect("file");
    let checkpoint = dir.path().join("checkpoint");
    let message = stderr(&eddy(&["run", &spec, "--checkpoint", checkpoint.to_str().expect("path")]));
    assert!(message.starts_with(&format!("error: {}:2: bad record: ", bad.display())), "{message}");
    let store =
        eddy::state::StateStore::open(&eddy::checkpoint::CheckpointDir::new(&checkpoint).store_dir()).expect("store");
    assert_eq!(store.committed_batch().expect("readable"), None);
}

#[test]
fn terminal_escape_sequences_from_data_are_printed_escaped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = write_spec(dir.path(), &valid_spec(wasm.to_str().expect("path")));
    let checkpoint = dir.path().join("checkpoint");
    let run = || eddy(&["run", &spec, "--checkpoint", checkpoint.to_str().expect("path")]);
    // A user whose name clears the screen (CSI): shorter than the console's 20 characters.
    std::fs::write(dir.path().join("input/a.jsonl"), "{\"user\":\"u\\u001b[2J\",\"amount\":5}\n").expect("file");
    let printed = stdout(&run());
    assert!(!printed.contains(['\u{1b}', '\u{7}']), "{printed:?}");
    assert!(printed.contains("| u\\u{1b}[2J "), "the console sink shows the name escaped: {printed}");
    // A bad record in a file whose name sets the terminal's title (OSC): the error
    // names it escaped.
    let name = "b\u{1b}]0;pwned\u{7}.jsonl";
    std::fs::write(dir.path().join("input").join(name), "{\"user\":\"u2\",\"amount\":\"five\"}\n").expect("file");
    let message = stderr(&run());
    assert!(!message.contains(['\u{1b}', '\u{7}']), "{message:?}");
    assert!(message.contains("b\\u{1b}]0;pwned\\u{7}.jsonl:1: bad record: "), "{message}");
}

#[test]
fn the_examples_print_their_expected_output() {
    for example in ["running-count", "alert-suppression", "freezer-stats"] {
        let dir = repo_root().join("examples").join(example);
        let printed = stdout(&eddy(&["run", dir.join("pipeline.toml").to_str().expect("path")]));
        let expected = std::fs::read_to_string(dir.join("expected-output.txt")).expect("expected output");
        assert_eq!(printed, expected, "{example}");
    }
}

#[test]
fn a_new_query_starts_from_its_initial_state_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = valid_spec(wasm.to_str().expect("path"))
        + "\n[operator.initial-state]\npath = \"seed.jsonl\"\nschema = \"user STRING, count BIGINT, sum BIGINT\"\n\n[sink]\nformat = \"json\"\npath = \"out\"\n";
    let spec = write_spec(dir.path(), &spec);
    std::fs::write(dir.path().join("seed.jsonl"), "{\"user\":\"u1\",\"count\":10,\"sum\":100}\n").expect("seed");
    let checkpoint = dir.path().join("checkpoint");
    let run = || stdout(&eddy(&["run", &spec, "--checkpoint", checkpoint.to_str().expect("path")]));
    std::fs::write(
        dir.path().join("input/a.jsonl"),
        "{\"user\":\"u1\",\"amount\":5}\n{\"user\":\"u2\",\"amount\":7}\n",
    )
    .expect("file");
    run();
    std::fs::write(dir.path().join("input/b.jsonl"), "{\"user\":\"u1\",\"amount\":1}\n").expect("file");
    run();
    let part = |n: &str| std::fs::read_to_string(dir.path().join("out").join(n)).expect("part");
    let mut first: Vec<&str> = Vec::new();
    let text = part("part-00000.jsonl");
    first.extend(text.lines());
    first.sort_unstable();
    assert_eq!(first, vec![r#"{"user":"u1","count":11,"sum":105}"#, r#"{"user":"u2","count":1,"sum":7}"#]);
    assert_eq!(
        part("part-00001.jsonl"),
        "{\"user\":\"u1\",\"count\":12,\"sum\":106}\n",
        "the seed is applied only once"
    );
}

#[test]
fn a_batch_planned_before_a_crash_is_replayed_exactly_and_marked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = write_spec(
        dir.path(),
        &valid_spec(wasm.to_str().expect("path")).replace("[[source]]\n", "[[source]]\nmax-files-per-trigger = 1\n"),
    );
    let checkpoint = dir.path().join("checkpoint");
    let cp = checkpoint.to_str().expect("path");
    std::fs::write(dir.path().join("input/a.jsonl"), "{\"user\":\"u1\",\"amount\":5}\n").expect("file");
    stdout(&eddy(&["run", &spec, "--checkpoint", cp]));
    // A crash after batch 1 was planned (offsets/1) and printed (the sink's manifest),
    // before its state was committed; another file has arrived since.
    std::fs::write(dir.path().join("input/b.jsonl"), "{\"user\":\"u1\",\"amount\":7}\n").expect("file");
    std::fs::write(dir.path().join("input/c.jsonl"), "{\"user\":\"u1\",\"amount\":100}\n").expect("file");
    let offsets = serde_json::json!({"version": 1, "batchId": 1, "batchTimestampUs": 1_700_000_000_000_000i64,
        "watermarkUs": null, "endOffsets": [{"filesCommitted": 2, "logOffset": 1}]});
    let source_log = serde_json::json!({"version": 1, "batchId": 1, "files": [{"name": "b.jsonl", "size": 25}]});
    std::fs::write(checkpoint.join("sources/0/1"), source_log.to_string()).expect("source log");
    std::fs::write(checkpoint.join("offsets/1"), offsets.to_string()).expect("offsets");
    std::fs::create_dir_all(checkpoint.join("sinks/0")).expect("sinks");
    std::fs::write(checkpoint.join("sinks/0/1"), "{}").expect("manifest");
    let printed = stdout(&eddy(&["run", &spec, "--checkpoint", cp]));
    // Batch 1 read exactly b.jsonl (not c.jsonl), is marked as a replay, and batch 2
    // then read c.jsonl.
    let squeeze = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (replayed, next) = printed.split_once("Batch: 2").expect("a batch 2");
    let replayed =
        squeeze(replayed.split_once("Batch: 1 (replayed after a restart; shown before)").expect("replay header").1);
    assert!(replayed.contains("| u1 | 2 | 12 |"), "{printed}");
    assert!(squeeze(next).contains("| u1 | 3 | 112 |"), "{printed}");
    let text = stdout(&eddy(&["state", "read", cp, "--changes", "1"]));
    assert!(text.contains("\"batch\":1"), "{text}");

    // A batch planned with another number of sources is not re-run with these.
    let offsets = serde_json::json!({"version": 1, "batchId": 3, "batchTimestampUs": 1_700_000_000_000_000i64,
        "watermarkUs": null, "endOffsets": [null, null]});
    std::fs::write(checkpoint.join("offsets/3"), offsets.to_string()).expect("offsets");
    assert_eq!(
        stderr(&eddy(&["run", &spec, "--checkpoint", cp])),
        "error: batch 3 was planned with 2 source(s) and the pipeline now has 1; restore the pipeline's sources to \
         let batch 3 finish, then change them\n"
    );
}
