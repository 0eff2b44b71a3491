//! The seed's scenarios as runnable examples, checked against what the test computes:
//! rate-window-counts, dedup-orders (the hands-on lab, step by step), enriched-revenue,
//! and freezer-builtin against the WebAssembly freezer-stats.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use eddy_tests::{eddy_bin, repo_root};

fn eddy(args: &[&str]) -> Output {
    Command::new(eddy_bin()).args(args).output().expect("eddy runs")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "eddy failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn example(name: &str) -> PathBuf {
    repo_root().join("examples").join(name).join("pipeline.toml")
}

/// The console sink's tables: per batch, the rows' cells.
fn tables(printed: &str) -> BTreeMap<u64, Vec<Vec<String>>> {
    let mut batches: BTreeMap<u64, Vec<Vec<String>>> = BTreeMap::new();
    let mut current = None;
    let mut header_seen = false;
    for line in printed.lines() {
        if let Some(batch) = line.strip_prefix("Batch: ") {
            current = Some(batch.trim().parse().expect("batch number"));
            batches.insert(current.expect("set"), Vec::new());
            header_seen = false;
        } else if line.starts_with('|') {
            if !header_seen {
                header_seen = true;
                continue;
            }
            let cells = line.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect();
            batches.get_mut(&current.expect("a row after a batch header")).expect("batch").push(cells);
        }
    }
    batches
}

/// `2026-01-01T00:00:10Z` as seconds after 2026-01-01T00:00:00Z.
fn seconds_into_2026(text: &str) -> i64 {
    let rest = text.strip_prefix("2026-01-01T").expect("a 2026-01-01 timestamp").trim_end_matches('Z');
    let parts: Vec<i64> =
        rest.split(':').map(|p| p.split('.').next().expect("part").parse().expect("number")).collect();
    parts[0] * 3600 + parts[1] * 60 + parts[2]
}

#[test]
fn rate_window_counts_prints_the_counts_of_every_window_each_batch() {
    let printed = stdout(&eddy(&["run", example("rate-window-counts").to_str().expect("path"), "--max-batches", "4"]));
    let batches = tables(&printed);
    assert_eq!(batches.len(), 4, "{printed}");
    for (batch, rows) in &batches {
        // Rows 0..25(batch+1), 5 per second from 00:00:00; complete mode: all windows.
        let mut expected: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        for value in 0..25 * (batch + 1) as i64 {
            let second = value / 5;
            *expected.entry((second - second % 10, value % 2)).or_default() += 1;
        }
        let printed: BTreeMap<(i64, i64), i64> = rows
            .iter()
            .map(|cells| {
                let start = seconds_into_2026(&cells[1]);
                assert_eq!(seconds_into_2026(&cells[2]), start + 10);
                ((start, cells[0].parse().expect("parity")), cells[3].parse().expect("count"))
            })
            .collect();
        assert_eq!(printed, expected, "batch {batch}");
    }
}

#[test]
fn enriched_revenue_sums_each_tier_s_minute_and_prints_what_changed() {
    let printed = stdout(&eddy(&["run", example("enriched-revenue").to_str().expect("path"), "--max-batches", "5"]));
    let batches = tables(&printed);
    assert_eq!(batches.len(), 5, "{printed}");
    let tier = |customer: i64| ["standard", "premium", "standard", "enterprise"][customer as usize];
    let mut sums: BTreeMap<(i64, &str), f64> = BTreeMap::new();
    for (batch, rows) in &batches {
        // 60 payments a batch (3 per second): value v at second v / 3, customer v % 4,
        // amount v % 20 + 1.
        let mut changed = BTreeSet::new();
        for value in 60 * *batch as i64..60 * (*batch as i64 + 1) {
            let key = ((value / 3) / 60 * 60, tier(value % 4));
            *sums.entry(key).or_default() += (value % 20 + 1) as f64;
            changed.insert(key);
        }
        let expected: BTreeMap<(i64, String), f64> =
            changed.iter().map(|key| ((key.0, key.1.to_string()), sums[key])).collect();
        let printed: BTreeMap<(i64, String), f64> = rows
            .iter()
            .map(|cells| ((seconds_into_2026(&cells[1]), cells[0].clone()), cells[3].parse().expect("sum")))
            .collect();
        assert_eq!(printed, expected, "batch {batch}");
    }
}

#[test]
fn freezer_builtin_gives_the_numbers_of_the_webassembly_freezer_stats() {
    let builtin = tables(&stdout(&eddy(&["run", example("freezer-builtin").to_str().expect("path")])));
    let processor = tables(&stdout(&eddy(&["run", example("freezer-stats").to_str().expect("path")])));
    let rows = |batches: &BTreeMap<u64, Vec<Vec<String>>>| -> BTreeMap<u64, BTreeSet<Vec<String>>> {
        batches.iter().map(|(batch, rows)| (*batch, rows.iter().cloned().collect())).collect()
    };
    assert!(processor.values().map(Vec::len).sum::<usize>() > 5, "freezer-stats outputs windows");
    assert_eq!(rows(&builtin), rows(&processor));
}

/// The dedup-orders pipeline in `dir`, reading `dir/input` and writing `dir/output`.
fn lab(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("input")).expect("input");
    let spec = std::fs::read_to_string(example("dedup-orders")).expect("spec");
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, spec).expect("spec");
    path
}

/// Every order the output holds.
fn written_orders(dir: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("output"))
        .map(|entries| {
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .flat_map(|file| std::fs::read_to_string(file).expect("part").lines().map(str::to_string).collect::<Vec<_>>())
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(&line).expect("JSON")["order_id"]
                .as_str()
                .expect("id")
                .to_string()
        })
        .collect()
}

#[test]
fn the_dedup_orders_lab_runs_step_by_step() {
    // 1–2: empty directories and the query.
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = lab(dir.path());
    let checkpoint = dir.path().join("checkpoint");
    let run =
        || stdout(&eddy(&["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]));
    let order = |id: &str, minute: u32| {
        format!(
            "{{\"order_id\": \"{id}\", \"customer_id\": \"c-1\", \"event_time\": \"2026-11-30T09:{minute:02}:00Z\"}}\n"
        )
    };
    // 3–4: two records of one order id a minute apart → one output order.
    std::fs::write(dir.path().join("input/a.jsonl"), order("o-1", 0) + &order("o-1", 1)).expect("file");
    run();
    assert_eq!(written_orders(dir.path()), ["o-1"]);
    // 5: a new order id → a second output order.
    std::fs::write(dir.path().join("input/b.jsonl"), order("o-2", 2)).expect("file");
    run();
    assert_eq!(written_orders(dir.path()), ["o-1", "o-2"]);
    // 6: restart with the same checkpoint: nothing is written again.
    run();
    assert_eq!(written_orders(dir.path()), ["o-1", "o-2"]);
    // Verification: unique ids written = the non-late unique ids of the input. A retry
    // of o-1 within the watermark is dropped; a record 20 minutes behind the newest
    // (late: the watermark is 10 minutes) is dropped; o-3 is new.
    std::fs::write(dir.path().join("input/c.jsonl"), order("o-1", 5) + &order("o-3", 30)).expect("file");
    run();
    std::fs::write(dir.path().join("input/d.jsonl"), order("o-4", 10)).expect("file");
    run();
    let written = written_orders(dir.path());
    let unique: BTreeSet<&String> = written.iter().collect();
    assert_eq!(unique.len(), written.len(), "no order written twice: {written:?}");
    assert_eq!(written, ["o-1", "o-2", "o-3"], "o-4 at 09:10 is at or before the watermark 09:20: late");
}
