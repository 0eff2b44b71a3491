//! A query over JSON-lines files of `user STRING, amount BIGINT, ts TIMESTAMP`, one file
//! per batch, for testing built-in stages: its spec, input, run and output by batch.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::eddy_bin;

/// One second in microseconds.
pub const SECOND: i64 = 1_000_000;

/// Runs the `eddy` binary.
pub fn eddy(args: &[&str]) -> Output {
    Command::new(eddy_bin()).args(args).output().expect("eddy runs")
}

/// The output of a run that must succeed.
pub fn check(output: &Output) -> String {
    assert!(output.status.success(), "eddy failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Microseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.fff…]Z` on 1969-12-31 or in
/// January 1970.
pub fn micros(text: &str) -> i64 {
    let (date, time) =
        text.trim_end_matches('Z').trim_end_matches("+00:00").split_once('T').expect("an RFC 3339 timestamp");
    let day: i64 = match date {
        "1969-12-31" => 0,
        _ if date.starts_with("1970-01-") => date[8..10].parse().expect("day"),
        _ => panic!("{text} is not near the epoch"),
    };
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let parts: Vec<i64> = hms.split(':').map(|p| p.parse().expect("number")).collect();
    let fraction = format!("{fraction:0<6}");
    let sub: i64 = fraction[..6].parse().expect("fraction");
    ((day - 1) * 86_400 + parts[0] * 3600 + parts[1] * 60 + parts[2]) * SECOND + sub
}

/// A query over `user STRING, amount BIGINT, ts TIMESTAMP` (watermark `delay` seconds)
/// whose batches are the given files, one per trigger; returns each batch's output rows.
pub struct Query {
    dir: tempfile::TempDir,
    /// The pipeline.toml written.
    pub spec: String,
    files: usize,
}

impl Query {
    /// A query whose chain is `stages` (watermark delay in seconds, if any).
    pub fn new(stages: &str, delay_seconds: Option<i64>) -> Query {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("input")).expect("input");
        let watermark = delay_seconds
            .map(|d| format!("watermark = {{ column = \"ts\", delay = \"{d} seconds\" }}"))
            .unwrap_or_default();
        let spec = format!(
            "name = \"stages\"\n[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
             schema = \"user STRING, amount BIGINT, ts TIMESTAMP\"\n{watermark}\n\n[trigger]\navailable-now = true\n\n\
             {stages}\n\n[sink]\nformat = \"json\"\npath = \"out\"\n"
        );
        std::fs::write(dir.path().join("pipeline.toml"), &spec).expect("spec");
        Query { dir, spec, files: 0 }
    }

    /// Adds one input file of `(user, amount, ts seconds)` rows.
    pub fn add(&mut self, rows: &[(&str, i64, i64)]) {
        let text: String = rows
            .iter()
            .map(|(user, amount, ts)| format!("{{\"user\":\"{user}\",\"amount\":{amount},\"ts\":{}}}\n", ts * SECOND))
            .collect();
        std::fs::write(self.dir.path().join(format!("input/part-{:03}.jsonl", self.files)), text).expect("file");
        self.files += 1;
    }

    /// Runs the query until its input is consumed; returns what it printed.
    pub fn run(&self) -> String {
        let spec = self.dir.path().join("pipeline.toml");
        let checkpoint = self.dir.path().join("checkpoint");
        check(&eddy(&["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]))
    }

    /// Every output row so far, by batch.
    pub fn output(&self) -> BTreeMap<u64, Vec<Value>> {
        let mut batches = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(self.dir.path().join("out")) else { return batches };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(batch) = name.strip_prefix("part-").and_then(|n| n.strip_suffix(".jsonl")) else { continue };
            let text = std::fs::read_to_string(entry.path()).expect("part");
            let rows = text.lines().map(|line| serde_json::from_str(line).expect("JSON row")).collect();
            batches.insert(batch.parse().expect("batch number"), rows);
        }
        batches
    }

    /// The query's directory (pipeline.toml, input, checkpoint, out).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
