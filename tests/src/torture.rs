//! The kill -9 harness: a query runs over many one-file batches while it is killed at
//! random points (seeded) and restarted each time; its final sink output and state are
//! compared with those of an uninterrupted run of the same spec and input.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eddy::state::{Cf, StateStore};

use crate::{Rng, eddy_bin};

/// A query to torture: writes its `pipeline.toml` (JSON sink to `out`) into a
/// directory, and its input files `from..to` into `input`.
pub trait Tortured {
    /// Writes the spec into `dir`.
    fn write_spec(&self, dir: &Path);
    /// Writes the spec of the uninterrupted reference run into `dir`: the same spec,
    /// unless the tortured one takes another way to the same result.
    fn write_reference_spec(&self, dir: &Path) {
        self.write_spec(dir);
    }
    /// Environment variables of the tortured runs (e.g. fault injection's).
    fn tortured_env(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
    /// Writes input files `from..to` (one batch each) into `input`.
    fn write_inputs(&self, input: &Path, from: u64, to: u64);
}

/// What a torture run found.
pub struct Outcome {
    /// The uninterrupted run's part files, by name.
    pub expected: BTreeMap<String, String>,
    /// How many kills the query survived.
    pub kills: u64,
    /// How many of them left a batch's changes written ahead of its commit (the next
    /// run rolled the batch back).
    pub kills_written_ahead: u64,
}

fn start(dir: &Path, env: &[(&str, &str)]) -> Child {
    Command::new(eddy_bin())
        .envs(env.iter().copied())
        .args([
            "run",
            dir.join("pipeline.toml").to_str().expect("path"),
            "--checkpoint",
            dir.join("checkpoint").to_str().expect("path"),
        ])
        .env("EDDY_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("eddy starts")
}

/// Every part file's text, in batch order.
pub fn sink_output(dir: &Path) -> BTreeMap<String, String> {
    let mut parts = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("out")).expect("out dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("part-") && name.ends_with(".jsonl") {
            parts.insert(name, std::fs::read_to_string(entry.path()).expect("part"));
        }
    }
    parts
}

/// Every state and timer entry of the checkpoint in `dir`.
pub fn final_state(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let store =
        StateStore::open(&eddy::checkpoint::CheckpointDir::new(dir.join("checkpoint")).store_dir()).expect("store");
    let txn = store.begin();
    let mut entries = txn.scan_prefix(Cf::State, &[]).expect("state");
    entries.extend(txn.scan_prefix(Cf::Timers, &[]).expect("timers"));
    entries
}

/// The temporary files and directories (`.….tmp`) anywhere under `dir`, outside the
/// RocksDB store (which manages its own files), and the store's copies from before a
/// batch (`store.before-<N>`, `store.discarded`: none is left once every batch committed).
fn temporary_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("directory").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let store_copy = name.starts_with("store.before-") || name == "store.discarded";
        if (name.starts_with('.') && name.ends_with(".tmp")) || store_copy {
            found.push(path);
        } else if path.is_dir() && name != "store" {
            found.extend(temporary_files(&path));
        }
    }
    found
}

/// Runs `query` over `files` batches uninterrupted, then again killed at least
/// `min_kills` times (each 0.1–0.9 s after a start, drawn from `rng`); asserts that the
/// output, the state and the absence of temporary files agree, and returns what it saw.
pub fn torture(query: &dyn Tortured, files: u64, min_kills: u64, rng: &mut Rng) -> Outcome {
    let reference = tempfile::tempdir().expect("temp dir");
    query.write_reference_spec(reference.path());
    std::fs::create_dir_all(reference.path().join("input")).expect("input dir");
    query.write_inputs(&reference.path().join("input"), 0, files);
    let output = start(reference.path(), &[]).wait_with_output().expect("uninterrupted run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let tortured = tempfile::tempdir().expect("temp dir");
    query.write_spec(tortured.path());
    std::fs::create_dir_all(tortured.path().join("input")).expect("input dir");
    query.write_inputs(&tortured.path().join("input"), 0, files);
    let (mut kills, mut kills_written_ahead) = (0, 0);
    let started = Instant::now();
    loop {
        let mut child = start(tortured.path(), &query.tortured_env());
        if kills < min_kills {
            std::thread::sleep(Duration::from_millis(100 + rng.below(800)));
            if child.try_wait().expect("status").is_none() {
                child.kill().expect("kill -9");
                child.wait().expect("reaped");
                kills += 1;
                let store = eddy::checkpoint::CheckpointDir::new(tortured.path().join("checkpoint")).store_dir();
                kills_written_ahead += u64::from(eddy::state::copy_before(&store).expect("listable").is_some());
                continue;
            }
        }
        let output = child.wait_with_output().expect("run");
        assert!(output.status.success(), "run after {kills} kills failed: {}", String::from_utf8_lossy(&output.stderr));
        if kills >= min_kills {
            break;
        }
        panic!("the run finished after only {kills} kills; raise the number of files");
    }
    eprintln!("survived {kills} kills in {:.1} s", started.elapsed().as_secs_f64());

    let expected = sink_output(reference.path());
    let got = sink_output(tortured.path());
    assert_eq!(got.len(), expected.len(), "the same batches");
    for (part, text) in &expected {
        assert_eq!(got.get(part), Some(text), "{part} differs after {kills} kills");
    }
    assert_eq!(final_state(tortured.path()), final_state(reference.path()), "the final state differs");
    let mut leftovers = temporary_files(&tortured.path().join("checkpoint"));
    leftovers.extend(temporary_files(&tortured.path().join("out")));
    assert!(leftovers.is_empty(), "writes interrupted by kills left {leftovers:?}");
    Outcome { expected, kills, kills_written_ahead }
}
