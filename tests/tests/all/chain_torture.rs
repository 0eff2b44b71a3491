//! kill -9 torture of a chain of built-in stages — SQL → dedup → window — over many
//! one-file batches: killed at random points and restarted, its output and state must
//! equal an uninterrupted run's. `EDDY_CHAIN_TORTURE_FILES`, `…_KILLS` and `…_SEED`
//! make it a longer soak.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use eddy_tests::torture::{Outcome, Tortured, torture};
use eddy_tests::{Rng, env_or};
use serde_json::Value;

/// The first file's event time, in seconds since the epoch (a multiple of 10).
const T0_SECONDS: i64 = 1_800_000_000;

struct Chain;

impl Tortured for Chain {
    fn write_spec(&self, dir: &Path) {
        let spec = "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
             schema = \"user STRING, amount BIGINT, ts TIMESTAMP\"\n\
             watermark = { column = \"ts\", delay = \"5 seconds\" }\n\n\
             [[stage]]\nname = \"clean\"\nsql = \"SELECT user, amount * 10 AS amount, ts FROM input WHERE amount >= 0\"\n\n\
             [[stage]]\nname = \"dedup\"\n[stage.dedup]\nkey = [\"user\", \"ts\"]\n\n\
             [[stage]]\nname = \"per-user\"\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\n\
             group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\", \"min(amount)\", \"max(amount)\"]\n\n\
             [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n";
        std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
    }

    /// File i: second i's rows for four users, a duplicate of one, a negative amount
    /// (filtered by SQL) and, every 7th file, a row from 3 s earlier.
    fn write_inputs(&self, input: &Path, from: u64, to: u64) {
        for i in from..to {
            let ts = (T0_SECONDS + i as i64) * 1_000_000;
            let row = |user: String, amount: i64, ts: i64| {
                format!("{{\"user\":\"{user}\",\"amount\":{amount},\"ts\":{ts}}}\n")
            };
            let mut lines: String =
                (0..4).map(|u| row(format!("u{}", (i + u) % 9), (i * 7 + u) as i64 % 50, ts)).collect();
            lines += &row(format!("u{}", i % 9), 1, ts);
            lines += &row("u0".to_string(), -1, ts);
            if i % 7 == 0 {
                lines += &row(format!("u{}", i % 5), 3, ts - 3_000_000);
            }
            std::fs::write(input.join(format!("batch-{i:06}.jsonl")), lines).expect("input file");
        }
    }
}

/// The windows the chain must close, computed from the input files' rules alone:
/// SQL keeps `amount >= 0` and multiplies it by 10; dedup keeps the first row of each
/// (user, ts) (within a file, file order; no row is late for it: the 3-seconds-early
/// rows are within the 5-second delay); 10-second windows per user, Spark's append
/// mode. Keyed by (user, window start in seconds since the epoch): (count, sum, min, max).
fn reference_windows(files: u64) -> BTreeMap<(String, i64), [i64; 4]> {
    let mut seen = BTreeSet::new();
    let mut windows: BTreeMap<(String, i64), [i64; 4]> = BTreeMap::new();
    for i in 0..files {
        let ts = T0_SECONDS + i as i64;
        let mut rows: Vec<(String, i64, i64)> =
            (0..4).map(|u| (format!("u{}", (i + u) % 9), (i * 7 + u) as i64 % 50, ts)).collect();
        rows.push((format!("u{}", i % 9), 1, ts));
        rows.push(("u0".to_string(), -1, ts));
        if i % 7 == 0 {
            rows.push((format!("u{}", i % 5), 3, ts - 3));
        }
        for (user, amount, ts) in rows {
            if amount < 0 || !seen.insert((user.clone(), ts)) {
                continue;
            }
            let amount = amount * 10;
            let window = windows.entry((user, ts - ts.rem_euclid(10))).or_insert([0, 0, i64::MAX, i64::MIN]);
            *window = [window[0] + 1, window[1] + amount, window[2].min(amount), window[3].max(amount)];
        }
    }
    windows
}

/// Seconds since the epoch of an RFC 3339 UTC timestamp with whole seconds.
fn epoch_seconds(text: &str) -> i64 {
    let (date, time) = text.trim_end_matches('Z').split_once('T').expect("an RFC 3339 timestamp");
    let number = |part: &str| part.parse::<i64>().expect("a number");
    let date: Vec<i64> = date.split('-').map(number).collect();
    let time: Vec<i64> = time.split(':').map(number).collect();
    // Days from the civil date (proleptic Gregorian), as in H. Hinnant's `days_from_civil`.
    let (year, month, day) = (date[0] - i64::from(date[1] <= 2), date[1], date[2]);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    days * 86_400 + time[0] * 3_600 + time[1] * 60 + time[2]
}

#[test]
fn kill_9_in_a_chain_of_stages_loses_and_duplicates_nothing() {
    let files = env_or("EDDY_CHAIN_TORTURE_FILES", 2_000);
    let min_kills = env_or("EDDY_CHAIN_TORTURE_KILLS", 30);
    let mut rng = Rng(env_or("EDDY_CHAIN_TORTURE_SEED", 0xc4a1));
    // The harness checks the tortured run against an uninterrupted one; this checks
    // the uninterrupted one against the reference.
    let Outcome { expected, .. } = torture(&Chain, files, min_kills, &mut rng);
    let mut emitted = BTreeMap::new();
    for line in expected.values().flat_map(|text| text.lines()) {
        let row: Value = serde_json::from_str(line).expect("a JSON row");
        let start = epoch_seconds(row["window_start"].as_str().expect("window_start"));
        assert_eq!(epoch_seconds(row["window_end"].as_str().expect("window_end")), start + 10, "{line}");
        let value = |name: &str| row[name].as_i64().expect(name);
        let aggregates = [value("count"), value("sum_amount"), value("min_amount"), value("max_amount")];
        let user = row["user"].as_str().expect("user").to_string();
        assert!(emitted.insert((user, start), aggregates).is_none(), "a window emitted twice: {line}");
    }
    // Append mode emits a window once the watermark (latest event time - 5 s) reaches
    // its end; the last batch's watermark is that of file `files - 2`, or `files - 1`
    // after a trailing batch without data. Windows ending by the first are all there,
    // none ending after the second is, and each emitted window is exact.
    let reference = reference_windows(files);
    let watermark = |file: u64| T0_SECONDS + file as i64 - 5;
    for ((user, start), aggregates) in &reference {
        let (end, got) = (start + 10, emitted.get(&(user.clone(), *start)));
        if end <= watermark(files - 2) {
            assert_eq!(got, Some(aggregates), "the window of {user} at {start}");
        } else if end > watermark(files - 1) {
            assert_eq!(got, None, "the window of {user} at {start} emitted before the watermark reached its end");
        } else if let Some(got) = got {
            assert_eq!(got, aggregates, "the window of {user} at {start}");
        }
    }
    let unexpected: Vec<_> = emitted.keys().filter(|key| !reference.contains_key(*key)).collect();
    assert!(unexpected.is_empty(), "windows no input row falls in: {unexpected:?}");
}
