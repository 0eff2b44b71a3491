//! Tests of the file source through [`open`], with real files and a real store.

use std::path::{Path, PathBuf};

use arrow::array::{Array, Int64Array, StringArray};
use serde_json::json;

use super::*;
use crate::pipeline::{BadRecordPolicy, parse_schema};
use crate::state::Cf;

struct Fixture {
    _dir: tempfile::TempDir,
    input: PathBuf,
    root: PathBuf,
    store: StateStore,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let input = root.join("input");
    std::fs::create_dir(&input).expect("mkdir");
    let store = StateStore::open(&CheckpointDir::new(&root).store_dir()).expect("store");
    Fixture { _dir: dir, input, root, store }
}

impl Fixture {
    fn checkpoint(&self) -> CheckpointDir {
        CheckpointDir::new(&self.root)
    }
}

fn spec(path: &Path, format: FileFormat, max_files_per_trigger: Option<usize>, policy: BadRecordPolicy) -> SourceSpec {
    SourceSpec {
        name: "clicks".into(),
        kind: SourceKind::Files {
            format,
            path: path.to_path_buf(),
            max_files_per_trigger,
            max_bytes_per_trigger: None,
        },
        schema: parse_schema("user STRING, amount BIGINT").expect("schema"),
        watermark: None,
        on_bad_record: policy,
    }
}

fn json_spec(path: &Path) -> SourceSpec {
    spec(path, FileFormat::Json, None, BadRecordPolicy::Fail)
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

fn users(batch: &SourceBatch) -> Vec<String> {
    let array = batch.rows.column(0).as_any().downcast_ref::<StringArray>().expect("strings");
    array.iter().map(|user| user.unwrap_or("<null>").to_string()).collect()
}

/// Commits what `batch` consumed, as the engine does.
pub(super) fn commit(store: &StateStore, batch: &SourceBatch, batch_id: u64) {
    let mut txn = store.begin();
    for (key, value) in &batch.commit {
        txn.put(Cf::Meta, key.clone(), value.clone());
    }
    store.commit(txn, batch_id).expect("commit");
}

#[test]
fn discovers_new_files_at_every_call_and_reads_each_once() {
    let f = fixture();
    write(&f.input, "a.jsonl", "{\"user\":\"a1\",\"amount\":1}\n{\"user\":\"a2\",\"amount\":2}\n");
    let mut source = open(&json_spec(&f.input), 3, &f.checkpoint()).expect("opens");
    assert_eq!(source.name(), "clicks");
    let first = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    assert_eq!(users(&first), ["a1", "a2"]);
    assert_eq!(first.start_offset, json!({"filesCommitted": 0}));
    assert_eq!(first.end_offset, json!({"filesCommitted": 1, "logOffset": 0}));
    let logged: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.root.join("sources/3/0")).expect("source log")).expect("json");
    assert_eq!(logged["files"], json!([{"name": "a.jsonl", "size": 50}]));
    assert!(first.commit.iter().all(|(key, _)| key.starts_with(b"source/3/")));
    // Not committed: planned again the same way.
    let again = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    assert_eq!((users(&again), again.end_offset), (users(&first), first.end_offset.clone()));
    commit(&f.store, &first, 0);
    assert!(source.next_batch(&f.store, 1, 0).expect("plans").is_none());
    write(&f.input, "b.json", "{\"user\":\"b\",\"amount\":3}\n");
    write(&f.input, ".c.json", "{\"user\":\"hidden\"}\n");
    write(&f.input, "d.txt", "{\"user\":\"text\"}\n");
    let second = source.next_batch(&f.store, 1, 0).expect("plans").expect("a batch");
    assert_eq!(users(&second), ["b"]);
    assert_eq!(second.start_offset, json!({"filesCommitted": 1}));
    commit(&f.store, &second, 1);
    // A restarted source (same index) sees the committed progress.
    let mut restarted = open(&json_spec(&f.input), 3, &f.checkpoint()).expect("opens");
    assert!(restarted.next_batch(&f.store, 2, 0).expect("plans").is_none());
    // Another index has its own progress.
    let mut other = open(&json_spec(&f.input), 4, &f.checkpoint()).expect("opens");
    assert_eq!(users(&other.next_batch(&f.store, 2, 0).expect("plans").expect("a batch")), ["a1", "a2", "b"]);
}

#[test]
fn a_single_file_is_read_once() {
    let f = fixture();
    let file = f.input.join("only.txt");
    write(&f.input, "only.txt", "{\"user\":\"x\"}\n");
    let mut source = open(&json_spec(&file), 0, &f.checkpoint()).expect("opens");
    let batch = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    assert_eq!(users(&batch), ["x"]);
    assert!(batch.rows.column(1).is_null(0));
    commit(&f.store, &batch, 0);
    assert!(source.next_batch(&f.store, 1, 0).expect("plans").is_none());
}

#[test]
fn takes_at_most_max_files_per_trigger() {
    let f = fixture();
    for name in ["c", "a", "b"] {
        write(&f.input, &format!("{name}.json"), &format!("{{\"user\":\"{name}\"}}\n"));
    }
    let mut source =
        open(&spec(&f.input, FileFormat::Json, Some(2), BadRecordPolicy::Fail), 0, &f.checkpoint()).expect("opens");
    let first = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    assert_eq!(users(&first), ["a", "b"]);
    commit(&f.store, &first, 0);
    let second = source.next_batch(&f.store, 1, 0).expect("plans").expect("a batch");
    assert_eq!(users(&second), ["c"]);
    assert_eq!(second.end_offset, json!({"filesCommitted": 3, "logOffset": 1}));
}

#[test]
fn takes_files_up_to_max_bytes_per_trigger_and_at_least_one() {
    let f = fixture();
    // 13-byte files, and one of 44 bytes, bigger than the whole budget of 30.
    for name in ["a", "b", "c", "e"] {
        write(&f.input, &format!("{name}.json"), &format!("{{\"user\":\"{name}\"}}\n"));
    }
    write(&f.input, "d.json", "{\"user\":\"d\"}\n{\"user\":\"d\",\"amount\":12345678}\n");
    let sizes: Vec<u64> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| f.input.join(format!("{n}.json")).metadata().expect("size").len())
        .collect();
    assert_eq!(sizes, [13, 13, 13, 44, 13]);
    let mut bounded = spec(&f.input, FileFormat::Json, None, BadRecordPolicy::Fail);
    if let SourceKind::Files { max_bytes_per_trigger, .. } = &mut bounded.kind {
        *max_bytes_per_trigger = Some(30);
    }
    let mut source = open(&bounded, 0, &f.checkpoint()).expect("opens");
    let mut batches = Vec::new();
    let mut batch_id = 0;
    while let Some(batch) = source.next_batch(&f.store, batch_id, 0).expect("plans") {
        let logged: serde_json::Value =
            serde_json::from_slice(&std::fs::read(f.root.join(format!("sources/0/{batch_id}"))).expect("source log"))
                .expect("json");
        let names: Vec<&str> =
            logged["files"].as_array().expect("files").iter().map(|f| f["name"].as_str().expect("name")).collect();
        batches.push((names.join(","), users(&batch)));
        commit(&f.store, &batch, batch_id);
        batch_id += 1;
    }
    let expected =
        [("a.json,b.json", vec!["a", "b"]), ("c.json", vec!["c"]), ("d.json", vec!["d", "d"]), ("e.json", vec!["e"])];
    let expected: Vec<(String, Vec<String>)> = expected
        .iter()
        .map(|(names, users)| (names.to_string(), users.iter().map(|u| u.to_string()).collect()))
        .collect();
    assert_eq!(batches, expected);
    // The once trigger lifts the limit: all new files in one batch.
    let mut once = open(&bounded, 1, &f.checkpoint()).expect("opens");
    once.lift_batch_limits();
    assert_eq!(
        users(&once.next_batch(&f.store, batch_id, 0).expect("plans").expect("a batch")),
        ["a", "b", "c", "d", "d", "e"]
    );
}

#[test]
fn available_now_leaves_later_files_for_a_later_run() {
    let f = fixture();
    write(&f.input, "a.json", "{\"user\":\"a\"}\n");
    write(&f.input, "b.json", "{\"user\":\"b\"}\n");
    let bounded_spec = spec(&f.input, FileFormat::Json, Some(1), BadRecordPolicy::Fail);
    let mut source = open(&bounded_spec, 0, &f.checkpoint()).expect("opens");
    assert!(!source.caught_up(&f.store).expect("reads"));
    source.bound_to_available_now(&f.store, 0).expect("binds");
    write(&f.input, "aa.json", "{\"user\":\"late\"}\n");
    let mut seen = Vec::new();
    let mut batch_id = 0;
    while !source.caught_up(&f.store).expect("reads") {
        let batch = source.next_batch(&f.store, batch_id, 0).expect("plans").expect("a batch");
        seen.extend(users(&batch));
        commit(&f.store, &batch, batch_id);
        batch_id += 1;
    }
    assert_eq!(seen, ["a", "b"]);
    assert!(source.next_batch(&f.store, batch_id, 0).expect("plans").is_none());
    let mut next_run = open(&bounded_spec, 0, &f.checkpoint()).expect("opens");
    next_run.bound_to_available_now(&f.store, 0).expect("binds");
    assert_eq!(users(&next_run.next_batch(&f.store, batch_id, 0).expect("plans").expect("a batch")), ["late"]);
}

#[test]
fn replans_exactly_the_recorded_files() {
    let f = fixture();
    write(&f.input, "b.json", "{\"user\":\"b\"}\n");
    let mut source = open(&json_spec(&f.input), 0, &f.checkpoint()).expect("opens");
    let planned = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    // The batch failed; a file arrived before the re-run.
    write(&f.input, "a.json", "{\"user\":\"a\"}\n");
    let mut restarted = open(&json_spec(&f.input), 0, &f.checkpoint()).expect("opens");
    let replayed = restarted.replan_batch(&f.store, 0, 0, &planned.end_offset).expect("replans").expect("a batch");
    assert_eq!(users(&replayed), ["b"]);
    assert_eq!(replayed.commit, planned.commit);
    commit(&f.store, &replayed, 0);
    let next = restarted.next_batch(&f.store, 1, 0).expect("plans").expect("a batch");
    assert_eq!(users(&next), ["a"]);
    let error = restarted.replan_batch(&f.store, 0, 0, &planned.end_offset).unwrap_err().to_string();
    assert!(error.contains("already committed"), "{error}");
    // A file that changed after its batch was planned is not silently re-read.
    write(&f.input, "a.json", "{\"user\":\"a\"}\n{\"user\":\"again\"}\n");
    let error = restarted.replan_batch(&f.store, 1, 0, &next.end_offset).unwrap_err().to_string();
    assert!(error.contains("a.json of batch 1 changed since the batch was planned (13 bytes then, 30 now)"), "{error}");
}

#[test]
fn reads_csv_with_a_header() {
    let f = fixture();
    write(&f.input, "a.csv", "user;amount\nann;5\n\"bo;b\";\n");
    write(&f.input, "b.json", "{\"user\":\"json\"}\n");
    let format = FileFormat::Csv { header: true, delimiter: b';' };
    let mut source = open(&spec(&f.input, format, None, BadRecordPolicy::Fail), 0, &f.checkpoint()).expect("opens");
    let batch = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    assert_eq!(users(&batch), ["ann", "bo;b"]);
    let amounts = batch.rows.column(1).as_any().downcast_ref::<Int64Array>().expect("ints");
    assert_eq!((amounts.value(0), amounts.is_null(1)), (5, true));
}

const MIXED: &str =
    "{\"user\":\"a\",\"amount\":1}\n{\"user\":\"b\",\"amount\":\"lots\"}\n{\"user\":\"c\",\"amount\":3}\n";

#[test]
fn fails_on_a_bad_record_naming_file_line_and_reason() {
    let f = fixture();
    write(&f.input, "a.json", MIXED);
    let mut source = open(&json_spec(&f.input), 0, &f.checkpoint()).expect("opens");
    let error = source.next_batch(&f.store, 0, 0).unwrap_err().to_string();
    let file = f.input.join("a.json");
    assert_eq!(
        error,
        format!(
            "{}:2: bad record: column 'amount': expected an integer for BIGINT, got \"lots\"; \
             expected a JSON object matching the schema (user STRING, amount BIGINT)",
            file.display()
        )
    );
    let format = FileFormat::Csv { header: false, delimiter: b',' };
    write(&f.input, "b.csv", "a,1\nb,x\n");
    let mut csv = open(&spec(&f.input, format, None, BadRecordPolicy::Fail), 1, &f.checkpoint()).expect("opens");
    let error = csv.next_batch(&f.store, 0, 0).unwrap_err().to_string();
    assert_eq!(
        error,
        format!(
            "{}:2: bad record: column 'amount': cannot read 'x' as BIGINT; \
             expected 2 fields separated by ',' matching the schema (user STRING, amount BIGINT)",
            f.input.join("b.csv").display()
        )
    );
}

#[test]
fn skips_and_counts_bad_records() {
    let f = fixture();
    write(&f.input, "a.json", MIXED);
    write(&f.input, "b.json", "oops\n{\"user\":\"d\"}\n");
    let mut source =
        open(&spec(&f.input, FileFormat::Json, None, BadRecordPolicy::Skip), 0, &f.checkpoint()).expect("opens");
    let batch = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    assert_eq!(users(&batch), ["a", "c", "d"]);
    assert_eq!(batch.bad_records, 2);
}

#[test]
fn dead_letters_bad_records_per_batch() {
    let f = fixture();
    let letters = f.root.join("dead");
    write(&f.input, "a.json", MIXED);
    write(&f.input, "b.json", "{\"user\":\"d\"}\n\nnot json\n");
    let policy = BadRecordPolicy::DeadLetter(letters.clone());
    let mut source = open(&spec(&f.input, FileFormat::Json, None, policy), 0, &f.checkpoint()).expect("opens");
    let batch = source.next_batch(&f.store, 7, 0).expect("plans").expect("a batch");
    assert_eq!(users(&batch), ["a", "c", "d"]);
    assert_eq!(batch.bad_records, 2);
    let written = std::fs::read_to_string(letters.join("batch-00007.jsonl")).expect("dead letters");
    let lines: Vec<serde_json::Value> = written.lines().map(|line| serde_json::from_str(line).expect("json")).collect();
    assert_eq!(
        lines,
        [
            json!({"source": "clicks", "file": f.input.join("a.json").display().to_string(), "line": 2,
                   "reason": "column 'amount': expected an integer for BIGINT, got \"lots\"",
                   "record": "{\"user\":\"b\",\"amount\":\"lots\"}"}),
            json!({"source": "clicks", "file": f.input.join("b.json").display().to_string(), "line": 3,
                   "reason": "invalid JSON at column 2: not a JSON literal (true, false or null)",
                   "record": "not json"}),
        ]
    );
    assert!(written.starts_with("{\"source\":\"clicks\",\"file\":"), "{written}");
    // A replayed batch rewrites the same file, whole.
    source.next_batch(&f.store, 7, 0).expect("plans");
    assert_eq!(std::fs::read_to_string(letters.join("batch-00007.jsonl")).expect("dead letters"), written);
    assert_eq!(std::fs::read_dir(&letters).expect("lists").count(), 1);
}

/// Records that are not strict JSON, or hold a value their column does not take, and
/// the reason each gets (columns counted by hand, from 1).
const NOT_STRICT: [(&str, &str); 9] = [
    ("{\"user\":\"m\",\"amount\":1.5}", "column 'amount': expected an integer for BIGINT, got 1.5"),
    ("{\"user\":\"m\",\"amount\":1e3}", "column 'amount': expected an integer for BIGINT, got 1e3"),
    ("{\"user\":\"m\",\"amount\":\"123\"}", "column 'amount': expected an integer for BIGINT, got \"123\""),
    ("{\"user\":\"m\",\"amount\":5,}", "invalid JSON at column 24: trailing comma"),
    ("{\"user\":\"m\" \"amount\":5}", "invalid JSON at column 13: expected `,` or `}`"),
    ("{\"user\":\"m\"} // a comment", "invalid JSON at column 14: trailing characters (JSON has no comments)"),
    (
        "{\"user\":\"m\",\"amount\":NaN}",
        "invalid JSON at column 22: expected value (JSON has no NaN or Infinity; a DOUBLE takes them as the \
         strings \"NaN\", \"Infinity\", \"-Infinity\")",
    ),
    ("{\"user\":'m'}", "invalid JSON at column 9: expected value (JSON strings take double quotes)"),
    ("{\"user\":\"m\",\"amount\":5}{\"user\":\"n\"}", "invalid JSON at column 24: trailing characters"),
];

#[test]
fn a_record_that_is_not_strict_is_bad_under_every_policy() {
    for (record, reason) in NOT_STRICT {
        let f = fixture();
        write(
            &f.input,
            "a.json",
            &format!("{{\"user\":\"a\",\"amount\":1}}\n{record}\n{{\"user\":\"c\",\"amount\":3}}\n"),
        );
        let file = f.input.join("a.json").display().to_string();
        let open_with = |policy, index| {
            open(&spec(&f.input, FileFormat::Json, None, policy), index, &f.checkpoint()).expect("opens")
        };

        let skipped = open_with(BadRecordPolicy::Skip, 0).next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
        assert_eq!((users(&skipped), skipped.bad_records), (vec!["a".to_string(), "c".to_string()], 1), "{record}");

        let letters = f.root.join("dead");
        let mut dead_letter = open_with(BadRecordPolicy::DeadLetter(letters.clone()), 1);
        let lettered = dead_letter.next_batch(&f.store, 4, 0).expect("plans").expect("a batch");
        assert_eq!((users(&lettered), lettered.bad_records), (users(&skipped), 1), "{record}");
        let written = std::fs::read_to_string(letters.join("batch-00004.jsonl")).expect("dead letters");
        let letter: serde_json::Value = serde_json::from_str(&written).expect("one JSON line");
        assert_eq!(letter, json!({"source": "clicks", "file": file, "line": 2, "reason": reason, "record": record}));

        let error = open_with(BadRecordPolicy::Fail, 2).next_batch(&f.store, 0, 0).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "{file}:2: bad record: {reason}; expected a JSON object matching the schema (user STRING, amount BIGINT)"
            )
        );
    }
}

#[test]
fn files_read_ahead_are_taken_only_as_they_are_when_the_next_batch_reads_them() {
    let f = fixture();
    for name in ["a", "b", "c", "d"] {
        write(&f.input, &format!("{name}.jsonl"), &format!("{{\"user\":\"{name}1\",\"amount\":1}}\n"));
    }
    let policy = BadRecordPolicy::Fail;
    let mut source = open(&spec(&f.input, FileFormat::Json, Some(1), policy), 0, &f.checkpoint()).expect("opens");
    let wait = || std::thread::sleep(std::time::Duration::from_millis(200));
    // Read ahead and unchanged: the next batch's rows are the file's.
    let first = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    source.read_ahead(&f.store);
    commit(&f.store, &first, 0);
    wait();
    let second = source.next_batch(&f.store, 1, 0).expect("plans").expect("a batch");
    assert_eq!(users(&second), ["b1"]);
    // Read ahead, then rewritten with another size: the batch reads it again.
    source.read_ahead(&f.store);
    commit(&f.store, &second, 1);
    wait();
    write(&f.input, "c.jsonl", "{\"user\":\"c-rewritten\",\"amount\":1}\n");
    let third = source.next_batch(&f.store, 2, 0).expect("plans").expect("a batch");
    assert_eq!(users(&third), ["c-rewritten"]);
    // Read ahead and found bad: the batch's own error names the file and line.
    source.read_ahead(&f.store);
    wait();
    commit(&f.store, &third, 2);
    write(&f.input, "d.jsonl", "{\"user\":\"d1\",\"amount\":\"x\"}\n");
    let Err(error) = source.next_batch(&f.store, 3, 0) else { panic!("a bad record fails the batch") };
    let error = error.to_string();
    assert!(error.contains("d.jsonl:1: bad record"), "{error}");
    // A batch that failed and is planned again (here: the same files) still reads them.
    write(&f.input, "d.jsonl", "{\"user\":\"d-fixed\",\"amount\":2}\n");
    let fourth = source.next_batch(&f.store, 3, 0).expect("plans").expect("a batch");
    assert_eq!(users(&fourth), ["d-fixed"]);
}

#[test]
fn a_symbolic_link_in_the_input_directory_is_never_read_into_a_dead_letter() {
    let f = fixture();
    let letters = f.root.join("dead");
    write(&f.input, "a.json", "{\"user\":\"a\",\"amount\":1}\nnot json\n");
    // /proc/self/environ is a regular file to a stat that follows the link, and none of
    // its lines is a record: read, all of it would go to the dead letters.
    std::os::unix::fs::symlink("/proc/self/environ", f.input.join("environ.json")).expect("link");
    let policy = BadRecordPolicy::DeadLetter(letters.clone());
    let mut source = open(&spec(&f.input, FileFormat::Json, None, policy), 0, &f.checkpoint()).expect("opens");
    let batch = source.next_batch(&f.store, 0, 0).expect("plans").expect("a batch");
    assert_eq!(users(&batch), ["a"]);
    assert_eq!(batch.bad_records, 1);
    assert_eq!(batch.end_offset, json!({"filesCommitted": 1, "logOffset": 0}), "only a.json was taken");
    let written = std::fs::read_to_string(letters.join("batch-00000.jsonl")).expect("dead letters");
    assert!(!written.contains("environ") && written.lines().count() == 1, "{written}");
}
