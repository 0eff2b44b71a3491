//! Built-in stages against references computed here: event-time windows in each
//! output mode with rows around the watermark, both deduplications, SQL with a static
//! table, a chain SQL → dedup → window, state read back with `eddy state`, and a
//! restart mid-stream that continues exactly.

use std::collections::{BTreeMap, BTreeSet};

use eddy_tests::stage_query::{Query, SECOND, check, eddy, micros};
use serde_json::Value;

/// A window result row as `(user, start s, end s, count, sum, min, max)`.
type WindowRow = (String, i64, i64, i64, i64, i64, i64);

fn window_row(row: &Value) -> WindowRow {
    let s = |name: &str| micros(row[name].as_str().expect("a timestamp")) / SECOND;
    let i = |name: &str| row[name].as_i64().expect("an integer");
    (
        row["user"].as_str().expect("user").to_string(),
        s("window_start"),
        s("window_end"),
        i("count"),
        i("sum_amount"),
        i("min_amount"),
        i("max_amount"),
    )
}

/// Tumbling windows of `size` seconds over the rows the watermark rules keep, computed
/// independently with Spark's rules for a windowed aggregation: a batch judges a row by
/// its window — late when the window ended at or before the watermark the batch before
/// it ran with — and its own watermark (max event time of earlier batches − delay)
/// closes windows whose end is at or before it.
fn reference_windows(
    batches: &[Vec<(&str, i64, i64)>],
    size: i64,
    delay: i64,
) -> (Vec<WindowRow>, BTreeSet<(String, i64)>) {
    let mut max_seen: Option<i64> = None;
    let mut previous_watermark: Option<i64> = None;
    let mut windows: BTreeMap<(String, i64), Vec<i64>> = BTreeMap::new();
    let mut emitted = Vec::new();
    let mut late = BTreeSet::new();
    // One more (empty) batch: the watermark moved after the last file.
    for batch in batches.iter().chain(std::iter::once(&Vec::new())) {
        let watermark = max_seen.map(|m| m - delay);
        for (user, amount, ts) in batch {
            if previous_watermark.is_some_and(|w| ts - ts.rem_euclid(size) + size <= w) {
                late.insert((user.to_string(), *ts));
                continue;
            }
            windows.entry((user.to_string(), ts - ts.rem_euclid(size))).or_default().push(*amount);
        }
        for (_, _, ts) in batch {
            max_seen = Some(max_seen.map_or(*ts, |m| m.max(*ts)));
        }
        if let Some(watermark) = watermark {
            let closed: Vec<(String, i64)> =
                windows.keys().filter(|(_, start)| start + size <= watermark).cloned().collect();
            let mut closed_rows: Vec<WindowRow> = closed
                .iter()
                .map(|key| {
                    let amounts = windows.remove(key).expect("window");
                    let (min, max) = (*amounts.iter().min().expect("rows"), *amounts.iter().max().expect("rows"));
                    (key.0.clone(), key.1, key.1 + size, amounts.len() as i64, amounts.iter().sum(), min, max)
                })
                .collect();
            closed_rows.sort_by_key(|row| (row.1, row.0.clone()));
            emitted.extend(closed_rows);
        }
        previous_watermark = watermark;
    }
    (emitted, late)
}

const WINDOW_STAGE: &str = "[[stage]]\nname = \"per-user\"\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\n\
     group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\", \"min(amount)\", \"max(amount)\"]\n";

#[test]
fn tumbling_windows_in_append_mode_match_the_reference_around_the_watermark() {
    // Watermark delay 10 s. Batch 0 sees up to 40 s → batch 1 runs with watermark 30 s
    // and judges by none; batch 2 judges by 30 s: a row at 25 is late (its window ends
    // exactly at 30), a row at exactly 30 is not (its window [30, 40) is open), a row
    // at 3 is far behind.
    let batches: Vec<Vec<(&str, i64, i64)>> = vec![
        vec![("a", 1, 1), ("a", 2, 4), ("b", 5, 9), ("a", 3, 12), ("b", 7, 40)],
        vec![("a", 4, 15), ("b", 1, 33), ("a", 6, 50)],
        vec![("a", 100, 25), ("b", 8, 30), ("a", 9, 3), ("b", 2, 61)],
    ];
    let mut query = Query::new(&format!("{WINDOW_STAGE}output-mode = \"append\"\n"), Some(10));
    for batch in &batches {
        query.add(batch);
    }
    query.run();
    let printed: Vec<WindowRow> = query.output().values().flatten().map(window_row).collect();
    let (expected, late) = reference_windows(&batches, 10, 10);
    assert!(late.contains(&("a".to_string(), 25)) && late.contains(&("a".to_string(), 3)), "{late:?}");
    assert!(!late.contains(&("b".to_string(), 30)));
    assert!(expected.iter().any(|row| row == &("b".to_string(), 30, 40, 2, 9, 1, 8)), "{expected:?}");
    assert_eq!(printed, expected);
    // Nothing is emitted twice, and the windows still open are in state.
    let state = check(&eddy(&[
        "state",
        "read",
        query.path().join("checkpoint").to_str().expect("path"),
        "--operator",
        "per-user",
    ]));
    assert!(state.contains("\"windows\""), "{state}");
}

#[test]
fn update_mode_outputs_every_changed_window_each_batch_and_complete_mode_all_of_them() {
    let batches: Vec<Vec<(&str, i64, i64)>> =
        vec![vec![("a", 1, 1), ("b", 2, 2)], vec![("a", 3, 5), ("a", 4, 11)], vec![("b", 5, 3)]];
    for mode in ["update", "complete"] {
        let mut query = Query::new(&format!("{WINDOW_STAGE}output-mode = \"{mode}\"\n"), None);
        for batch in &batches {
            query.add(batch);
        }
        query.run();
        let output = query.output();
        // Independently: the windows after each batch, all or the changed ones.
        let mut windows: BTreeMap<(String, i64), Vec<i64>> = BTreeMap::new();
        for (index, batch) in batches.iter().enumerate() {
            let mut changed = BTreeSet::new();
            for (user, amount, ts) in batch {
                let key = (user.to_string(), ts - ts.rem_euclid(10));
                windows.entry(key.clone()).or_default().push(*amount);
                changed.insert(key);
            }
            let mut expected: Vec<WindowRow> = windows
                .iter()
                .filter(|(key, _)| mode == "complete" || changed.contains(*key))
                .map(|((user, start), a)| {
                    (
                        user.clone(),
                        *start,
                        start + 10,
                        a.len() as i64,
                        a.iter().sum(),
                        *a.iter().min().expect("rows"),
                        *a.iter().max().expect("rows"),
                    )
                })
                .collect();
            expected.sort_by_key(|row| (row.1, row.0.clone()));
            let printed: Vec<WindowRow> = output[&(index as u64)].iter().map(window_row).collect();
            assert_eq!(printed, expected, "{mode}, batch {index}");
            // Progress counts the stage's open windows (all of them: none closes here).
            let progress = std::fs::read_to_string(query.path().join(format!("checkpoint/progress/{index}.json")))
                .expect("progress record");
            let progress: Value = serde_json::from_str(&progress).expect("JSON");
            assert_eq!(progress["stateOperators"][0]["numRowsTotal"], windows.len(), "{mode}, batch {index}");
            // The change feed has one update per window the batch changed, with its count.
            let changes = state_windows(&query, &["--changes", &format!("{index}..{index}")]);
            let expected: BTreeMap<(String, i64), (String, i64)> =
                changed.iter().map(|key| (key.clone(), ("update".to_string(), windows[key].len() as i64))).collect();
            assert_eq!(changes, expected, "{mode}, batch {index}");
        }
        // The state holds every window (none closes), one map entry each.
        let expected: BTreeMap<(String, i64), (String, i64)> =
            windows.iter().map(|(key, amounts)| (key.clone(), (String::new(), amounts.len() as i64))).collect();
        assert_eq!(state_windows(&query, &[]), expected, "{mode}");
    }
}

/// The window stage's state entries (or with `--changes`, changes) as `eddy state read`
/// lists them: (user, window start in seconds) → (change, count).
fn state_windows(query: &Query, extra: &[&str]) -> BTreeMap<(String, i64), (String, i64)> {
    let checkpoint = query.path().join("checkpoint");
    let mut args = vec!["state", "read", checkpoint.to_str().expect("path"), "--operator", "per-user"];
    args.extend_from_slice(extra);
    let mut entries = BTreeMap::new();
    for line in check(&eddy(&args)).lines() {
        let entry: Value = serde_json::from_str(line).expect("JSON line");
        assert_eq!(entry["var"], "windows", "{line}");
        let user = entry["key"][0].as_str().expect("user").to_string();
        let start = entry["mapKey"].as_i64().expect("window start") / SECOND;
        let change = entry["change"].as_str().unwrap_or_default().to_string();
        let count = entry["value"]["aggregates"][0]["n"].as_i64().expect("count");
        assert_eq!(entry["value"]["end"].as_i64(), Some((start + 10) * SECOND), "{line}");
        assert!(entries.insert((user, start), (change, count)).is_none(), "listed twice: {line}");
    }
    entries
}

#[test]
fn append_mode_without_a_watermark_is_refused_with_spark_s_reason() {
    let query = Query::new(&format!("{WINDOW_STAGE}output-mode = \"append\"\n"), None);
    let output = eddy(&["run", query.path().join("pipeline.toml").to_str().expect("path")]);
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("stage 'per-user'") && error.contains("append mode needs a watermark"), "{error}");
}

#[test]
fn sliding_and_session_windows_match_the_reference() {
    let rows = vec![("a", 1, 1), ("a", 2, 4), ("a", 3, 12), ("b", 4, 7), ("a", 5, 30), ("a", 6, 33)];
    // Sliding: 10 s every 5 s, complete mode after one batch.
    let sliding = "[[stage]]\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\nslide = \"5 seconds\"\n\
         group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\", \"min(amount)\", \"max(amount)\"]\noutput-mode = \"complete\"\n";
    let mut query = Query::new(sliding, None);
    query.add(&rows);
    query.run();
    let printed: Vec<WindowRow> = query.output()[&0].iter().map(window_row).collect();
    let mut expected: BTreeMap<(String, i64), Vec<i64>> = BTreeMap::new();
    for (user, amount, ts) in &rows {
        for start in (ts - 9..=*ts).filter(|s| s.rem_euclid(5) == 0) {
            expected.entry((user.to_string(), start)).or_default().push(*amount);
        }
    }
    let mut expected: Vec<WindowRow> = expected
        .into_iter()
        .map(|((user, start), a)| {
            (
                user,
                start,
                start + 10,
                a.len() as i64,
                a.iter().sum(),
                *a.iter().min().expect("rows"),
                *a.iter().max().expect("rows"),
            )
        })
        .collect();
    expected.sort_by_key(|row| (row.1, row.0.clone()));
    assert_eq!(printed, expected);

    // Sessions with a 5 s gap: a: {1, 4} → [1, 9), {12} → [12, 17), {30, 33} → [30, 38);
    // b: {7} → [7, 12). A later row at 8 for a bridges [1, 9) and [12, 17), in a run
    // after a restart (the sessions read back from the store).
    let session = "[[stage]]\n[stage.window]\ntime-column = \"ts\"\ngap = \"5 seconds\"\n\
         group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\", \"min(amount)\", \"max(amount)\"]\noutput-mode = \"complete\"\n";
    let mut query = Query::new(session, None);
    query.add(&rows);
    query.run();
    query.add(&[("a", 10, 8)]);
    query.run();
    let output = query.output();
    let first: Vec<WindowRow> = output[&0].iter().map(window_row).collect();
    assert_eq!(
        first,
        vec![
            ("a".into(), 1, 9, 2, 3, 1, 2),
            ("b".into(), 7, 12, 1, 4, 4, 4),
            ("a".into(), 12, 17, 1, 3, 3, 3),
            ("a".into(), 30, 38, 2, 11, 5, 6),
        ]
    );
    let second: Vec<WindowRow> = output[&1].iter().map(window_row).collect();
    assert_eq!(
        second,
        vec![("a".into(), 1, 17, 4, 16, 1, 10), ("b".into(), 7, 12, 1, 4, 4, 4), ("a".into(), 30, 38, 2, 11, 5, 6)]
    );
}

#[test]
fn dedup_keeps_first_occurrences_forgets_past_the_watermark_and_within_it() {
    // dropDuplicates(user, ts) with a 10 s watermark: (a, 5) twice → once; after the
    // watermark passes 5, a new (a, 5) would be late anyway (dropped by the watermark).
    let mut query = Query::new("[[stage]]\nname = \"dedup\"\n[stage.dedup]\nkey = [\"user\", \"ts\"]\n", Some(10));
    query.add(&[("a", 1, 5), ("a", 2, 5), ("b", 3, 5)]);
    query.add(&[("a", 4, 5), ("c", 5, 40)]);
    query.add(&[("a", 6, 5), ("d", 7, 60)]);
    query.run();
    let rows: Vec<(String, i64)> = query
        .output()
        .values()
        .flatten()
        .map(|row| (row["user"].as_str().expect("user").to_string(), row["amount"].as_i64().expect("amount")))
        .collect();
    assert_eq!(rows, [("a".to_string(), 1), ("b".to_string(), 3), ("c".to_string(), 5), ("d".to_string(), 7)]);

    // dropDuplicatesWithinWatermark(user), delay 10 s: a at 0 is remembered until the
    // watermark reaches 10.
    let mut query = Query::new("[[stage]]\n[stage.dedup]\nkey = [\"user\"]\nwithin-watermark = true\n", Some(10));
    query.add(&[("a", 1, 0), ("a", 2, 3)]);
    query.add(&[("a", 3, 9), ("z", 4, 30)]);
    query.add(&[("a", 5, 25)]);
    query.add(&[("a", 6, 40)]);
    query.run();
    let rows: Vec<i64> = query.output().values().flatten().map(|row| row["amount"].as_i64().expect("amount")).collect();
    // a at 25 comes while a is still remembered (a batch evicts after its rows, as in
    // Spark); the batch's watermark (20) then passes 0 + 10, so a at 40 is new again.
    assert_eq!(rows, [1, 4, 6]);
}

/// A within-watermark dedup run in two parts over one checkpoint, twice: as is, and
/// with the checkpoint made between the parts what an eddy before the index-only and
/// packed timers wrote (each timer also kept by key and its own index entry, a state
/// schema without `timers_by_key` and `timers_packed`). The second part drops the
/// timers kept by key and packs the index, and both output the same rows.
#[test]
fn dedup_drops_the_timers_an_earlier_layout_kept_by_key() {
    use eddy::state::{Cf, StateStore, layout, schema_key, timer_buckets};
    let packed = |store: &StateStore| {
        let index = store.begin().scan_prefix(Cf::TimerIndex, &[]).expect("timer index");
        index.iter().all(|(raw, value)| !timer_buckets::is_single(raw, value))
    };
    let by_key = |store: &StateStore| store.begin().scan_prefix(Cf::Timers, &[]).expect("timers").len();
    let schema = |store: &StateStore| -> Value {
        let raw = store.read(Cf::Meta, &schema_key(0)).expect("readable").expect("the stage's schema");
        serde_json::from_slice(&raw).expect("JSON")
    };
    let run_in_two_parts = |earlier_layout: bool| -> Vec<i64> {
        let mut query = Query::new("[[stage]]\n[stage.dedup]\nkey = [\"user\"]\nwithin-watermark = true\n", Some(10));
        query.add(&[("a", 1, 0), ("a", 2, 3), ("b", 3, 4)]);
        query.add(&[("a", 4, 9), ("z", 5, 30), ("y", 6, 32)]);
        query.run();
        let store_dir = eddy::checkpoint::CheckpointDir::new(query.path().join("checkpoint")).store_dir();
        if earlier_layout {
            let store = StateStore::open(&store_dir).expect("store");
            let committed = store.committed_batch().expect("readable").expect("a committed batch");
            assert_eq!(by_key(&store), 0, "the stage keeps its timers in the index only");
            let mut txn = store.begin();
            let index = txn.scan_prefix(Cf::TimerIndex, &[]).expect("timer index");
            assert!(!index.is_empty() && packed(&store), "z's and y's timers are pending, packed");
            let mut timers = 0;
            for (raw, value) in &index {
                let operator = u16::from_be_bytes([raw[0], raw[1]]);
                for (expiry, key_group, key) in timer_buckets::entry_timers(raw, value).expect("an index entry") {
                    let prefix = layout::key_prefix(operator, key_group, &key);
                    txn.put(Cf::Timers, layout::timer_key(&prefix, expiry), Vec::new());
                    txn.put(Cf::TimerIndex, layout::timer_index_key(operator, expiry, key_group, &key), Vec::new());
                    timers += 1;
                }
                txn.delete(Cf::TimerIndex, raw.clone());
            }
            let mut earlier = schema(&store);
            assert_eq!(earlier["timers_by_key"], Value::Bool(false));
            assert_eq!(earlier["timers_packed"], Value::Bool(true));
            earlier.as_object_mut().expect("an object").remove("timers_by_key");
            earlier.as_object_mut().expect("an object").remove("timers_packed");
            txn.put(Cf::Meta, schema_key(0), serde_json::to_vec(&earlier).expect("JSON"));
            store.commit(txn, committed).expect("committed");
            assert_eq!(by_key(&store), timers);
            assert!(!packed(&store), "one index entry per timer");
        }
        query.add(&[("z", 7, 35), ("a", 8, 36)]);
        query.add(&[("y", 9, 60), ("w", 10, 100)]);
        query.run();
        let store = StateStore::open(&store_dir).expect("store");
        assert_eq!(by_key(&store), 0, "none kept by key after the second part");
        let left = store.begin().scan_prefix(Cf::TimerIndex, &[]).expect("timer index").len();
        assert!(left > 0 && packed(&store), "the index packed after the second part (w's timer is pending)");
        assert_eq!(schema(&store)["timers_by_key"], Value::Bool(false));
        assert_eq!(schema(&store)["timers_packed"], Value::Bool(true));
        query.output().values().flatten().map(|row| row["amount"].as_i64().expect("amount")).collect()
    };
    let rows = run_in_two_parts(false);
    // The second part is one batch (watermark 22): z at 35 and y at 60 are still
    // remembered (until 40 and 42), a was forgotten at 10; w is new.
    assert_eq!(rows, [1, 3, 5, 6, 8, 10]);
    assert_eq!(run_in_two_parts(true), rows);
}

#[test]
fn dedup_without_a_watermark_must_say_forever() {
    let query = Query::new("[[stage]]\n[stage.dedup]\nkey = [\"user\"]\n", None);
    let output = eddy(&["run", query.path().join("pipeline.toml").to_str().expect("path")]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("state = \\\"forever\\\"") || error.contains("state = \"forever\""), "{error}");
    let mut query = Query::new("[[stage]]\n[stage.dedup]\nkey = [\"user\"]\nstate = \"forever\"\n", None);
    query.add(&[("a", 1, 0), ("b", 2, 1), ("a", 3, 2)]);
    query.add(&[("a", 4, 1000), ("c", 5, 1)]);
    query.run();
    let rows: Vec<i64> = query.output().values().flatten().map(|row| row["amount"].as_i64().expect("amount")).collect();
    assert_eq!(rows, [1, 2, 5]);
}

#[test]
fn sql_joins_a_static_table_and_refuses_what_cannot_run_per_batch() {
    let stages = "[[table]]\nname = \"users\"\nformat = \"csv\"\npath = \"users.csv\"\nschema = \"id STRING, tier STRING\"\n\n\
         [[stage]]\nsql = \"SELECT i.user, u.tier, i.amount * 2 AS doubled FROM input i LEFT JOIN users u ON i.user = u.id WHERE i.amount > 1\"\n";
    let mut query = Query::new(stages, None);
    std::fs::write(query.path().join("users.csv"), "id,tier\na,gold\nb,silver\n").expect("table");
    query.add(&[("a", 5, 1), ("b", 1, 2), ("c", 7, 3)]);
    query.run();
    let mut rows: Vec<(String, Value, i64)> = query
        .output()
        .values()
        .flatten()
        .map(|row| {
            (row["user"].as_str().expect("user").to_string(), row["tier"].clone(), row["doubled"].as_i64().expect("n"))
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(rows, [("a".to_string(), Value::from("gold"), 10), ("c".to_string(), Value::Null, 14)]);

    for (sql, reason) in [
        ("SELECT user, count(*) FROM input GROUP BY user", "use an aggregate stage ([stage.aggregate])"),
        ("SELECT * FROM input ORDER BY ts", "ORDER BY"),
        ("SELECT * FROM input LIMIT 3", "LIMIT"),
        ("SELECT a.user FROM input a JOIN input b ON a.user = b.user", "with itself"),
        ("SELECT DISTINCT user FROM input", "use an aggregate stage ([stage.aggregate])"),
        (
            "SELECT * FROM input WHERE amount > (SELECT avg(amount) FROM input)",
            "use an aggregate stage ([stage.aggregate])",
        ),
        ("SELECT u.id FROM users u LEFT JOIN input i ON i.user = u.id", "static table's rows"),
        ("SELECT user, random() AS r FROM input", "random() gives other values"),
        ("INSERT INTO users SELECT user, user FROM input", "does not plan"),
    ] {
        let query = Query::new(
            &format!(
                "[[table]]\nname = \"users\"\nformat = \"csv\"\npath = \"users.csv\"\nschema = \"id STRING, tier STRING\"\n\n[[stage]]\nsql = \"{sql}\"\n"
            ),
            None,
        );
        std::fs::write(query.path().join("users.csv"), "id,tier\na,gold\n").expect("table");
        let output = eddy(&["run", query.path().join("pipeline.toml").to_str().expect("path")]);
        let error = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && error.contains(reason), "{sql}: {error}");
    }
}

/// A query joining 20 input rows of user `a` with a static table that has `a` 50
/// times: 1 000 output rows, against a stage cap of `max_rows`.
fn exploding_join(max_rows: u64) -> (Query, std::process::Output) {
    let stages = format!(
        "[[table]]\nname = \"users\"\nformat = \"csv\"\npath = \"users.csv\"\nschema = \"id STRING, tier STRING\"\n\n\
         [[stage]]\nname = \"enrich\"\nmax-output-rows-per-batch = {max_rows}\n\
         sql = \"SELECT i.user, u.tier, i.amount FROM input i JOIN users u ON i.user = u.id\"\n"
    );
    let mut query = Query::new(&stages, None);
    let table: String = (0..50).map(|n| format!("a,tier-{n}\n")).collect();
    std::fs::write(query.path().join("users.csv"), format!("id,tier\n{table}")).expect("table");
    query.add(&(0..20).map(|n| ("a", n, n)).collect::<Vec<_>>());
    let output = eddy(&["run", query.path().join("pipeline.toml").to_str().expect("path")]);
    (query, output)
}

#[test]
fn a_join_that_multiplies_rows_past_the_stage_output_cap_fails_naming_it() {
    // 20 rows × 50 matches = 1 000 rows: at the cap, the batch runs.
    let (query, output) = exploding_join(1_000);
    check(&output);
    assert_eq!(query.output()[&0].len(), 1_000);
    // One row under: the batch fails naming the stage and the cap, and publishes nothing.
    let (query, output) = exploding_join(999);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{error}");
    assert!(
        error.contains("SQL stage 'enrich': the query's output of this batch passed 999 rows")
            && error.contains("max-output-rows-per-batch"),
        "{error}"
    );
    assert!(query.output().is_empty(), "nothing published");
}

#[test]
fn every_stage_kind_fails_a_batch_past_its_output_cap() {
    // A 10-second window sliding by 1 second: each row is in 10 windows, so 3 users'
    // rows make 30 (window, user) rows in update mode.
    let window = |max_rows: u64| {
        format!(
            "[[stage]]\nname = \"sliding\"\nmax-output-rows-per-batch = {max_rows}\n[stage.window]\n\
             time-column = \"ts\"\nsize = \"10 seconds\"\nslide = \"1 second\"\ngroup-by = [\"user\"]\n\
             aggregates = [\"count\"]\noutput-mode = \"update\"\n"
        )
    };
    let rows = [("a", 1, 5), ("b", 2, 5), ("c", 3, 5)];
    let mut query = Query::new(&window(30), None);
    query.add(&rows);
    query.run();
    assert_eq!(query.output()[&0].len(), 30);
    let mut query = Query::new(&window(29), None);
    query.add(&rows);
    let output = eddy(&["run", query.path().join("pipeline.toml").to_str().expect("path")]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && error.contains("stage 'sliding' output 30 rows in this batch, over its limit of 29 rows per batch"),
        "{error}"
    );
    assert!(query.output().is_empty(), "nothing published");
}

#[test]
fn a_chain_sql_dedup_window_restarts_mid_stream_and_continues_exactly() {
    let stages = "[[stage]]\nname = \"clean\"\nsql = \"SELECT user, amount, ts FROM input WHERE amount >= 0\"\n\n\
         [[stage]]\nname = \"dedup\"\n[stage.dedup]\nkey = [\"user\", \"ts\"]\n\n\
         [[stage]]\nname = \"per-user\"\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\ngroup-by = [\"user\"]\n\
         aggregates = [\"count\", \"sum(amount)\", \"min(amount)\", \"max(amount)\"]\noutput-mode = \"append\"\n";
    let batches: Vec<Vec<(&str, i64, i64)>> = vec![
        vec![("a", 1, 1), ("a", 1, 1), ("a", -5, 2), ("b", 2, 3), ("a", 3, 14)],
        vec![("a", 4, 14), ("b", 5, 25), ("a", 6, 31)],
        vec![("b", 7, 42), ("a", 8, 55)],
    ];
    // One run over everything, and one that stops after the first file and restarts.
    let mut whole = Query::new(stages, Some(5));
    batches.iter().for_each(|batch| whole.add(batch));
    whole.run();
    let mut restarted = Query::new(stages, Some(5));
    restarted.add(&batches[0]);
    restarted.run();
    restarted.add(&batches[1]);
    restarted.add(&batches[2]);
    restarted.run();
    let rows = |q: &Query| -> Vec<WindowRow> { q.output().values().flatten().map(window_row).collect() };
    // Independently: negative amounts filtered, (user, ts) duplicates dropped, windows.
    let cleaned: Vec<Vec<(&str, i64, i64)>> = {
        let mut seen = BTreeSet::new();
        batches
            .iter()
            .map(|batch| batch.iter().filter(|(u, a, t)| *a >= 0 && seen.insert((*u, *t))).copied().collect())
            .collect()
    };
    let (expected, _) = reference_windows(&cleaned, 10, 5);
    assert_eq!(rows(&whole), expected);
    assert_eq!(rows(&restarted), expected);
    assert_eq!(whole.spec, restarted.spec);
}

#[test]
fn a_stateful_stage_after_a_window_in_update_mode_is_refused() {
    let stages = format!(
        "{WINDOW_STAGE}output-mode = \"update\"\n\n[[stage]]\nname = \"after\"\n[stage.dedup]\nkey = [\"user\"]\nstate = \"forever\"\n"
    );
    let query = Query::new(&stages, Some(5));
    let output = eddy(&["run", query.path().join("pipeline.toml").to_str().expect("path")]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(error.contains("stage 'after'") && error.contains("follows stage 'per-user'"), "{error}");
}

#[test]
fn sql_results_of_other_types_become_eddy_s_and_can_be_keys() {
    // CAST(… AS INT) is Int32 and a string literal Utf8View in DataFusion: both become
    // eddy types (BIGINT, STRING), so a window can group by them.
    let stages = "[[stage]]\nsql = \"SELECT user, CAST(amount % 2 AS INT) AS parity, 'x' AS tag, ts FROM input\"\n\n\
         [[stage]]\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\ngroup-by = [\"parity\", \"tag\"]\naggregates = [\"count\"]\noutput-mode = \"complete\"\n";
    let mut query = Query::new(stages, None);
    query.add(&[("a", 1, 1), ("b", 2, 2), ("c", 3, 3)]);
    query.run();
    let rows: Vec<(i64, String, i64)> = query.output()[&0]
        .iter()
        .map(|row| {
            (
                row["parity"].as_i64().expect("parity"),
                row["tag"].as_str().expect("tag").to_string(),
                row["count"].as_i64().expect("count"),
            )
        })
        .collect();
    assert_eq!(rows, [(0, "x".to_string(), 1), (1, "x".to_string(), 2)]);
}

#[test]
fn windows_at_the_ends_of_time_and_nan_readings_do_not_break_the_stage() {
    let stages = "[[stage]]\nsql = \"SELECT user, CASE WHEN amount = 0 THEN CAST('NaN' AS DOUBLE) ELSE CAST(amount AS DOUBLE) END AS ratio, ts FROM input\"\n\n\
         [[stage]]\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\nslide = \"5 seconds\"\ngroup-by = [\"user\"]\n\
         aggregates = [\"count\", \"min(ratio)\", \"max(ratio)\"]\noutput-mode = \"complete\"\n";
    // A NaN orders after every number (Spark): it is never the minimum.
    let mut query = Query::new(stages, None);
    query.add(&[("a", 0, 1), ("a", 2, 2)]);
    query.run();
    let output = query.output();
    assert_eq!(output[&0].len(), 2, "two sliding windows hold a's rows");
    for row in &output[&0] {
        assert_eq!((row["count"].as_i64(), row["min_ratio"].as_f64()), (Some(2), Some(2.0)), "{row}");
    }
    // Event times at the ends of i64 make window bounds overflow: those windows are
    // left out or end at the end of time, and the query runs on (no panic).
    let query = Query::new(stages, None);
    let text = format!(
        "{{\"user\":\"z\",\"amount\":1,\"ts\":{}}}\n{{\"user\":\"y\",\"amount\":1,\"ts\":{}}}\n",
        i64::MAX,
        i64::MIN + 1
    );
    std::fs::write(query.path().join("input/part-000.jsonl"), text).expect("file");
    query.run();
}

#[test]
fn windows_stored_packed_or_on_their_own_survive_restarts_and_read_back_once() {
    // 1000 users' windows in one end: about 8 per key group, stored packed. Batches
    // touching a few of them store those on their own (newer than the packed copy); one
    // touching most of them rewrites the buckets packed; a restart loads both, `eddy
    // state` shows each window once, each batch's change feed has exactly the windows
    // it changed, and closing them all leaves nothing behind.
    let first: Vec<(String, i64, i64)> = (0..1000).map(|i| (format!("u{i:03}"), i % 7 + 1, 1)).collect();
    let most: Vec<(String, i64, i64)> = (0..1000).filter(|i| i % 10 != 3).map(|i| (format!("u{i:03}"), 2, 3)).collect();
    let few = |rows: &[(&str, i64, i64)]| -> Vec<(String, i64, i64)> {
        rows.iter().map(|(u, a, t)| (u.to_string(), *a, *t)).collect()
    };
    let batches = [
        first,
        few(&[("u001", 10, 5), ("u500", 20, 5), ("u999", 30, 5)]),
        most,
        few(&[("u500", 40, 6), ("u002", 50, 7)]),
        few(&[("x", 1, 500)]),
    ];
    let mut query = Query::new(&format!("{WINDOW_STAGE}output-mode = \"append\"\n"), Some(100));
    query.add(&as_refs(&batches[0]));
    query.add(&as_refs(&batches[1]));
    query.run();
    let state = state_windows(&query, &[]);
    assert_eq!(state.len(), 1000);
    for (user, count) in [("u001", 2), ("u500", 2), ("u999", 2), ("u002", 1), ("u777", 1)] {
        assert_eq!(state[&(user.to_string(), 0)], (String::new(), count), "{user}");
    }
    query.add(&as_refs(&batches[2]));
    query.add(&as_refs(&batches[3]));
    query.add(&as_refs(&batches[4]));
    query.run();
    // Independently: each batch's changed windows, with their counts after it. (The
    // change feeds of batches that read no rows, e.g. when only the watermark moved,
    // are empty and left out.)
    let feeds: Vec<_> = (0..6)
        .map(|batch| state_windows(&query, &["--changes", &format!("{batch}..{batch}")]))
        .filter(|feed| !feed.is_empty())
        .collect();
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for (index, batch) in batches.iter().enumerate().take(4) {
        for (user, _, _) in batch {
            *counts.entry(user.clone()).or_default() += 1;
        }
        let expected: BTreeMap<(String, i64), (String, i64)> =
            batch.iter().map(|(user, _, _)| ((user.clone(), 0), ("update".to_string(), counts[user]))).collect();
        assert_eq!(feeds[index], expected, "data batch {index}'s change feed");
    }
    let printed: Vec<WindowRow> = query.output().values().flatten().map(window_row).collect();
    let all: Vec<Vec<(&str, i64, i64)>> = batches.iter().map(|batch| as_refs(batch)).collect();
    let (expected, _) = reference_windows(&all, 10, 100);
    assert_eq!(expected.len(), 1000, "every window of the first end closes");
    assert_eq!(printed, expected);
    let left: Vec<(String, i64)> = state_windows(&query, &[]).into_keys().collect();
    assert_eq!(left, vec![("x".to_string(), 500)]);
}

fn as_refs(batch: &[(String, i64, i64)]) -> Vec<(&str, i64, i64)> {
    batch.iter().map(|(u, a, t)| (u.as_str(), *a, *t)).collect()
}
