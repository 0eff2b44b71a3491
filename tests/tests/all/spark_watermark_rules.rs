//! Spark's rules where the watermark meets stateful stages, with the expected rows and
//! progress counters written out by hand from Spark's source (Spark 4,
//! `statefulOperators.scala`, `StreamingSessionWindowStateManager.scala`,
//! `IncrementalExecution.shouldRunAnotherBatch`): a dedup by id alone that still drops
//! late rows, complete mode that runs no batch for the watermark alone, a late row of
//! a sliding window counted once per late window, and sessions that merge.
//!
//! The harness runs one input file per batch. Batch N runs with the watermark
//! `max event time of batches before N − delay` and judges late rows by the watermark
//! batch N − 1 ran with (none for batches 0 and 1 here): a row at or before it is late.

use std::collections::BTreeMap;

use eddy_tests::stage_query::{Query, SECOND, micros};
use serde_json::Value;

/// The progress record of batch `batch`, if the query ran one.
fn progress(query: &Query, batch: u64) -> Option<Value> {
    let path = query.path().join(format!("checkpoint/progress/{batch}.json"));
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).expect("a JSON progress record"))
}

/// Batch `batch`'s `stateOperators` entry of the one stateful stage, checked to be the
/// only entry.
fn state_operator(query: &Query, batch: u64) -> Value {
    let record = progress(query, batch).unwrap_or_else(|| panic!("no progress record of batch {batch}"));
    let operators = record["stateOperators"].as_array().expect("stateOperators").clone();
    assert_eq!(operators.len(), 1, "one stateful stage, batch {batch}: {operators:?}");
    operators[0].clone()
}

/// `(numRowsUpdated, numRowsRemoved, numRowsDroppedByWatermark)` of `operator`.
fn counters(operator: &Value) -> (u64, u64, u64) {
    let count = |name: &str| operator[name].as_u64().unwrap_or_else(|| panic!("{name} in {operator}"));
    (count("numRowsUpdated"), count("numRowsRemoved"), count("numRowsDroppedByWatermark"))
}

/// The rows of each batch as `(user, amount)`.
fn users_and_amounts(query: &Query) -> BTreeMap<u64, Vec<(String, i64)>> {
    let pair = |row: &Value| (row["user"].as_str().expect("user").to_string(), row["amount"].as_i64().expect("amount"));
    query.output().into_iter().map(|(batch, rows)| (batch, rows.iter().map(pair).collect())).collect()
}

/// A window row as `(user, start s, end s, count, sum)`.
type WindowRow = (String, i64, i64, i64, i64);

fn window_rows(rows: &[Value]) -> Vec<WindowRow> {
    let s = |row: &Value, name: &str| micros(row[name].as_str().expect("a timestamp")) / SECOND;
    rows.iter()
        .map(|row| {
            (
                row["user"].as_str().expect("user").to_string(),
                s(row, "window_start"),
                s(row, "window_end"),
                row["count"].as_i64().expect("count"),
                row["sum_amount"].as_i64().expect("sum"),
            )
        })
        .collect()
}

fn row(user: &str, start: i64, end: i64, count: i64, sum: i64) -> WindowRow {
    (user.to_string(), start, end, count, sum)
}

/// `dropDuplicates(["user"])` after `withWatermark("ts", "10 seconds")`, behind a SQL
/// stage. Spark's rules (`BaseStreamingDeduplicateExec.doExecute`):
/// - late rows are dropped before the key is looked up, by the event-time column of the
///   operator's input (`watermarkPredicateForDataForLateEvents`), whether or not the key
///   holds it, and counted in `numRowsDroppedByWatermark` (`applyRemovingRowsOlderThanWatermark`);
/// - a key is evicted only when the key holds the event-time column
///   (`watermarkPredicateForKeysForEviction`): a key without it is kept forever;
/// - `numRowsUpdated` counts the keys put (first occurrences that pass).
///
/// And a stateless stage is no stateful operator: `stateOperators` lists the dedup only.
#[test]
fn dedup_by_id_keeps_every_key_and_still_drops_late_rows() {
    let stages = "[[stage]]\nname = \"project\"\nsql = \"SELECT user, amount, ts FROM input\"\n\n\
                  [[stage]]\nname = \"by-id\"\n[stage.dedup]\nkey = [\"user\"]\nstate = \"forever\"\n";
    let mut query = Query::new(stages, Some(10));
    // Batch 0: no watermark. a and b pass, the second a is a duplicate. Next: 105 − 10 = 95.
    query.add(&[("a", 1, 100), ("b", 2, 100), ("a", 3, 105)]);
    // Batch 1: judged by batch 0's watermark (none): c at 90 passes, a is a duplicate.
    // Next watermark: 200 − 10 = 190.
    query.add(&[("c", 4, 90), ("a", 5, 200)]);
    // Batch 2: judged by batch 1's watermark, 95: d at 95 and f at 50 are late (dropped,
    // 2 counted), e at 96 passes, b is a duplicate (kept forever). Next: 290.
    query.add(&[("d", 6, 95), ("e", 7, 96), ("b", 8, 300), ("f", 9, 50)]);
    // Batch 3: judged by 190: g at 191 passes; a, first seen at 100, is still a duplicate
    // long after the watermark (290) passed 100.
    query.add(&[("a", 10, 400), ("g", 11, 191)]);
    query.run();
    let output = users_and_amounts(&query);
    let expected: BTreeMap<u64, Vec<(String, i64)>> = BTreeMap::from([
        (0, vec![("a".into(), 1), ("b".into(), 2)]),
        (1, vec![("c".into(), 4)]),
        (2, vec![("e".into(), 7)]),
        (3, vec![("g".into(), 11)]),
    ]);
    let with_rows: BTreeMap<u64, Vec<(String, i64)>> =
        output.into_iter().filter(|(_, rows)| !rows.is_empty()).collect();
    assert_eq!(with_rows, expected);
    for (batch, expected) in [(0, (2, 0, 0)), (1, (1, 0, 0)), (2, (1, 0, 2)), (3, (1, 0, 0))] {
        let operator = state_operator(&query, batch);
        assert_eq!(operator["operatorName"], "by-id", "batch {batch}");
        assert_eq!(counters(&operator), expected, "batch {batch}: (updated, removed, dropped by watermark)");
    }
    assert_eq!(progress(&query, 2).expect("batch 2")["numInputRows"], 4);
}

/// A window stage in complete mode with a watermark. Spark's rules:
/// - complete mode neither drops late rows nor evicts (`StateStoreSaveExec`, case
///   `Complete`: every input row is put, every state row output);
/// - a batch without new rows runs only when a stateful operator asks for one
///   (`IncrementalExecution.shouldRunAnotherBatch`), and `StateStoreSaveExec` asks only in
///   append or update mode when the watermark moved: after the last data batch moved
///   the watermark, complete mode runs no further batch (the whole table is not output
///   again), update mode does;
/// - `numRowsUpdated` counts the (group, window) rows put; `numRowsTotal` the windows kept.
#[test]
fn complete_mode_runs_no_batch_for_the_watermark_alone_and_drops_nothing() {
    let window = |mode: &str| {
        format!(
            "[[stage]]\nname = \"per-user\"\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\n\
             group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\"]\noutput-mode = \"{mode}\"\n"
        )
    };
    let batches: [&[(&str, i64, i64)]; 3] = [
        // Batch 0: next watermark 50 − 10 = 40.
        &[("a", 1, 5), ("b", 2, 12), ("a", 3, 50)],
        // Batch 1 (watermark 40, judged by none): next watermark 60.
        &[("a", 4, 1), ("c", 5, 70)],
        // Batch 2 (watermark 60, judged by 40): a at 2 is in [0, 10), which ended at or
        // before 40 — late for append and update, counted in complete. Next: 70.
        &[("a", 6, 2), ("b", 7, 80)],
    ];
    let mut complete = Query::new(&window("complete"), Some(10));
    let mut update = Query::new(&window("update"), Some(10));
    for batch in batches {
        complete.add(batch);
        update.add(batch);
    }
    complete.run();
    update.run();

    let output = complete.output();
    let expected: BTreeMap<u64, Vec<WindowRow>> = BTreeMap::from([
        (0, vec![row("a", 0, 10, 1, 1), row("b", 10, 20, 1, 2), row("a", 50, 60, 1, 3)]),
        (1, vec![row("a", 0, 10, 2, 5), row("b", 10, 20, 1, 2), row("a", 50, 60, 1, 3), row("c", 70, 80, 1, 5)]),
        (
            2,
            vec![
                row("a", 0, 10, 3, 11),
                row("b", 10, 20, 1, 2),
                row("a", 50, 60, 1, 3),
                row("c", 70, 80, 1, 5),
                row("b", 80, 90, 1, 7),
            ],
        ),
    ]);
    let printed: BTreeMap<u64, Vec<WindowRow>> =
        output.iter().map(|(batch, rows)| (*batch, window_rows(rows))).collect();
    assert_eq!(printed, expected);
    assert!(progress(&complete, 3).is_none(), "complete mode ran a batch for the watermark alone");
    for (batch, updated, total) in [(0, 3, 3), (1, 2, 4), (2, 2, 5)] {
        let operator = state_operator(&complete, batch);
        assert_eq!(counters(&operator), (updated, 0, 0), "complete, batch {batch}");
        assert_eq!(operator["numRowsTotal"], total, "complete, batch {batch}");
    }

    // Update mode: the late row is dropped and counted, and the watermark that moved
    // after batch 2 runs batch 3 without rows, which outputs nothing.
    assert_eq!(counters(&state_operator(&update, 2)).2, 1, "update, batch 2 drops a at 2");
    assert!(progress(&update, 3).is_some(), "update mode runs a batch when the watermark moved");
    assert_eq!(progress(&update, 3).expect("batch 3")["numInputRows"], 0);
    assert!(update.output().get(&3).is_none_or(Vec::is_empty), "batch 3 outputs nothing");
}

/// A sliding window (10 s every 5 s) in update mode. Spark's rule: rows are expanded to
/// every window they fall in and aggregated per (group, window) before the late filter
/// (`StateStoreSaveExec` drops the aggregated rows whose window ended at or before the
/// previous batch's watermark), so `numRowsDroppedByWatermark` counts late (group,
/// window) pairs: a late row counts once per late window it falls in, rows sharing a
/// late window once together, and a row with one open window is kept there.
#[test]
fn a_late_row_of_a_sliding_window_counts_once_per_late_window() {
    let stage = "[[stage]]\nname = \"sliding\"\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\n\
                 slide = \"5 seconds\"\ngroup-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\"]\n\
                 output-mode = \"update\"\n";
    let mut query = Query::new(stage, Some(10));
    // Batch 0: next watermark 40 − 10 = 30. Batch 1: judged by none, next watermark 40.
    query.add(&[("a", 1, 40), ("b", 2, 40)]);
    query.add(&[("a", 3, 50)]);
    // Batch 2, judged by 30:
    // - a at 22 is in [15, 25) and [20, 30), both ended by 30: 2 late pairs;
    // - a at 23: the same two windows, already counted: 0 more;
    // - b at 27 is in [20, 30) (late: 1 pair) and [25, 35) (open: b is counted there);
    // - c at 24 is in [15, 25) and [20, 30): 2 late pairs.
    // 5 late (group, window) pairs (3 rows dropped entirely).
    query.add(&[("a", 4, 22), ("a", 5, 23), ("b", 6, 27), ("c", 7, 24)]);
    query.run();
    let output = query.output();
    assert_eq!(window_rows(&output[&2]), vec![row("b", 25, 35, 1, 6)]);
    // Updated: the one (group, window) put, b's [25, 35). Removed: the windows batch 2's
    // watermark (40) closes, after the update is output: b's [25, 35) (the windows of 40
    // and 50 end after 40).
    assert_eq!(counters(&state_operator(&query, 2)), (1, 1, 5), "(updated, removed, dropped by watermark)");
}

/// Session windows (gap 5 s) in complete mode. Spark's rule
/// (`SessionWindowStateStoreSaveExec.putToStore` → `updateSessions` → `putRows`): for
/// each group with rows in the batch, every session the group has after merging the
/// rows with its stored sessions is put (`numRowsUpdated`, the untouched ones too), and
/// each stored session whose start is no longer a session's start is removed
/// (`numRowsRemoved`). Groups without rows are not touched.
#[test]
fn merging_sessions_count_updated_and_removed_rows_as_spark_does() {
    let stage = "[[stage]]\nname = \"sessions\"\n[stage.window]\ntime-column = \"ts\"\ngap = \"5 seconds\"\n\
                 group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\"]\noutput-mode = \"complete\"\n";
    let mut query = Query::new(stage, None);
    // Batch 0: a has [1, 9) (1 and 4), [12, 17), [30, 35); b has [7, 12).
    // Updated: a's 3 sessions + b's 1 = 4; removed: 0.
    query.add(&[("a", 1, 1), ("a", 2, 4), ("a", 3, 12), ("b", 4, 7), ("a", 5, 30)]);
    // Batch 1: a at 8 opens [8, 13), which bridges [1, 9) and [12, 17) into [1, 17):
    // a puts [1, 17) and the untouched [30, 35) (2), and removes [12, 17) (1).
    // b at 3 opens [3, 8), merged with [7, 12) into [3, 12): b puts 1 and removes the
    // session that started at 7 (1). Updated 3, removed 2.
    query.add(&[("a", 10, 8), ("b", 11, 3)]);
    query.run();
    let output = query.output();
    assert_eq!(
        window_rows(&output[&0]),
        vec![row("a", 1, 9, 2, 3), row("b", 7, 12, 1, 4), row("a", 12, 17, 1, 3), row("a", 30, 35, 1, 5)]
    );
    assert_eq!(window_rows(&output[&1]), vec![row("a", 1, 17, 4, 16), row("b", 3, 12, 2, 15), row("a", 30, 35, 1, 5)]);
    assert_eq!(counters(&state_operator(&query, 0)), (4, 0, 0), "batch 0: (updated, removed, dropped)");
    assert_eq!(counters(&state_operator(&query, 1)), (3, 2, 0), "batch 1: (updated, removed, dropped)");
    assert_eq!(state_operator(&query, 1)["numRowsTotal"], 3);
}

/// Session windows (gap 5 s) in append mode with a 10 s watermark. Spark's rules: a
/// row's session is `[t, t + gap)`, and the batch's rows are aggregated per (group,
/// that session) before `SessionWindowStateStoreRestoreExec` drops the late ones — those
/// whose session ended at or before the previous batch's watermark — and counts them in
/// `numRowsDroppedByWatermark` (per input partition; eddy's batch is one); append mode
/// outputs and removes the sessions the batch's watermark reaches (`numRowsRemoved`).
#[test]
fn late_rows_of_sessions_count_once_per_group_and_session() {
    let stage = "[[stage]]\nname = \"sessions\"\n[stage.window]\ntime-column = \"ts\"\ngap = \"5 seconds\"\n\
                 group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\"]\noutput-mode = \"append\"\n";
    let mut query = Query::new(stage, Some(10));
    // Batch 0: a has [50, 55); next watermark 40. Batch 1 (judged by none, watermark
    // 40): a has [60, 65) too; nothing ends by 40. Next watermark 50.
    query.add(&[("a", 1, 50)]);
    query.add(&[("a", 2, 60)]);
    // Batch 2, judged by 40, watermark 50:
    // - b at 30 twice: [30, 35) ended by 40, one (group, session) pair: 1;
    // - b at 31: [31, 36), another pair: 1; c at 34: [34, 39): 1 — 3 pairs, 4 rows;
    // - a at 36: [36, 41) ends after 40: kept. a then has [36, 41), [50, 55) and
    //   [60, 65): 3 updated; the watermark 50 closes [36, 41): output, 1 removed.
    query.add(&[("b", 3, 30), ("b", 4, 30), ("b", 5, 31), ("c", 6, 34), ("a", 7, 36)]);
    query.run();
    assert_eq!(window_rows(&query.output()[&2]), vec![row("a", 36, 41, 1, 7)]);
    assert_eq!(counters(&state_operator(&query, 2)), (3, 1, 3), "(updated, removed, dropped by watermark)");
}
