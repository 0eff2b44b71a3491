//! The seed's freezer scenario (shared/seeds/001): one reading every 10 s for 30 min
//! from 08:00, normally 2 s late; the 08:09–08:10 readings arrive at 08:21 and the
//! 08:15–08:16 readings at 08:28:20. Processed in arrival order, one batch per arrival,
//! ten-minute windows with watermarks of 2, 10 and 15 minutes drop 12, 6 and 0
//! readings and give the seed's per-window counts.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use eddy_tests::{eddy_bin, repo_root};

const BASE: &str = "2026-11-13T08:";

fn at(seconds: u32) -> String {
    format!("{BASE}{:02}:{:02}Z", seconds / 60, seconds % 60)
}

/// The seed's events as (event second, arrival second), written one file per arrival.
fn write_readings(input: &Path) {
    let buffered = |s: u32| (540..600).contains(&s) || (900..960).contains(&s);
    let mut events: Vec<(u32, u32)> = (0..1800).step_by(10).filter(|s| !buffered(*s)).map(|s| (s, s + 2)).collect();
    events.extend((540..600).step_by(10).map(|s| (s, 1260)));
    events.extend((900..960).step_by(10).map(|s| (s, 1700)));
    events.sort_by_key(|(_, arrival)| *arrival);
    let mut files: BTreeMap<u32, String> = BTreeMap::new();
    for (event, arrival) in events {
        let temperature = -18.0 - f64::from(event % 7) * 0.1;
        let line = format!("{{\"unit\":\"u1\",\"temperature\":{temperature:.1},\"ts\":\"{}\"}}\n", at(event));
        files.entry(arrival).or_default().push_str(&line);
    }
    // A last reading of another unit at 09:00 moves the watermark past 08:30, so that
    // every window of u1 is final and emitted.
    files.insert(3600, "{\"unit\":\"u2\",\"temperature\":-18.0,\"ts\":\"2026-11-13T09:00:00Z\"}\n".into());
    for (arrival, lines) in files {
        std::fs::write(input.join(format!("arrival-{arrival:05}.jsonl")), lines).expect("input file");
    }
}

/// Runs the freezer pipeline with a `delay_minutes` watermark; returns u1's count per
/// window start (HH:MM) and the readings its processor counted as late (its
/// `late_readings` state, read back with `eddy state read`).
fn run_with_watermark(delay_minutes: u32) -> (BTreeMap<String, i64>, i64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("input");
    std::fs::create_dir(&input).expect("input dir");
    write_readings(&input);
    let wasm = repo_root().join("build/wasm/freezer_stats.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
         schema = \"unit STRING, temperature DOUBLE, ts TIMESTAMP\"\n\
         watermark = {{ column = \"ts\", delay = \"{delay_minutes} minutes\" }}\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"unit\"]\noutput-mode = \"append\"\ntime-mode = \"event-time\"\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(&pipeline, spec).expect("spec");
    let checkpoint = dir.path().join("cp");
    eddy(&["run", pipeline.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]);
    let mut counts = BTreeMap::new();
    for entry in std::fs::read_dir(dir.path().join("out")).expect("out dir") {
        let path = entry.expect("entry").path();
        if !path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("part-")) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("part");
        for line in text.lines() {
            let row: serde_json::Value = serde_json::from_str(line).expect("json");
            if row["unit"] == "u1" {
                let start = row["window_start"].as_str().expect("window_start")[11..16].to_string();
                let previous = counts.insert(start.clone(), row["count"].as_i64().expect("count"));
                assert!(previous.is_none(), "window {start} emitted twice");
            }
        }
    }
    let late =
        eddy(&["state", "read", checkpoint.to_str().expect("path"), "--var", "late_readings", "--key", "[\"u1\"]"]);
    let late = match late.trim() {
        "" => 0,
        line => {
            serde_json::from_str::<serde_json::Value>(line).expect("a JSON line")["value"].as_i64().expect("a count")
        }
    };
    (counts, late)
}

/// Runs `eddy` with `args`; its standard output.
fn eddy(args: &[&str]) -> String {
    let output = Command::new(eddy_bin()).args(args).env("EDDY_LOG", "warn").output().expect("eddy runs");
    assert!(output.status.success(), "eddy {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

/// The seed's counts per window, and the readings dropped as late: those of a burst
/// that arrives after the watermark (latest reading - delay) has passed its window's
/// end, as counted by the processor itself.
fn expect(delay: u32, dropped: i64, windows: [(&str, i64); 3]) {
    let (counts, late) = run_with_watermark(delay);
    let expected: BTreeMap<String, i64> = windows.iter().map(|(w, c)| (w.to_string(), *c)).collect();
    assert_eq!(counts, expected, "{delay}-minute watermark");
    assert_eq!(late, dropped, "{delay}-minute watermark drops");
}

#[test]
fn a_two_minute_watermark_drops_both_bursts() {
    expect(2, 12, [("08:00", 54), ("08:10", 54), ("08:20", 60)]);
}

#[test]
fn a_ten_minute_watermark_drops_the_first_burst() {
    expect(10, 6, [("08:00", 54), ("08:10", 60), ("08:20", 60)]);
}

#[test]
fn a_fifteen_minute_watermark_keeps_every_reading() {
    expect(15, 0, [("08:00", 60), ("08:10", 60), ("08:20", 60)]);
}
