//! The aggregate stage (`groupBy(cols).agg(...)` without a window) against a reference
//! computed here: update and complete modes over several batches with late rows and
//! nulls, a restart that continues the totals, one group of every row, its state read
//! back with `eddy state`, and the modes and limits it refuses.

use std::collections::{BTreeMap, BTreeSet};

use eddy_tests::stage_query::{Query, check, eddy};
use serde_json::Value;

const TOTALS: &str = "[[stage]]\nname = \"totals\"\n[stage.aggregate]\ngroup-by = [\"user\"]\n\
     aggregates = [\"count\", \"count(amount) as amounts\", \"sum(amount) as total\", \"min(amount)\", \"max(amount)\", \"avg(amount)\"]\n";

/// `(user, count, amounts, total, min, max, avg)`, with `None` for a null.
type TotalsRow = (String, i64, i64, Option<i64>, Option<i64>, Option<i64>, Option<f64>);

fn totals_row(row: &Value) -> TotalsRow {
    (
        row["user"].as_str().expect("user").to_string(),
        row["count"].as_i64().expect("count"),
        row["amounts"].as_i64().expect("amounts"),
        row["total"].as_i64(),
        row["min_amount"].as_i64(),
        row["max_amount"].as_i64(),
        row["avg_amount"].as_f64(),
    )
}

/// Every user's totals over `rows` (`None`: a null amount).
fn reference(rows: &[(String, Option<i64>)]) -> BTreeMap<String, TotalsRow> {
    let mut by_user: BTreeMap<String, Vec<Option<i64>>> = BTreeMap::new();
    for (user, amount) in rows {
        by_user.entry(user.clone()).or_default().push(*amount);
    }
    by_user
        .into_iter()
        .map(|(user, amounts)| {
            let present: Vec<i64> = amounts.iter().flatten().copied().collect();
            let total = (!present.is_empty()).then(|| present.iter().sum::<i64>());
            let row = (
                user.clone(),
                amounts.len() as i64,
                present.len() as i64,
                total,
                present.iter().min().copied(),
                present.iter().max().copied(),
                total.map(|t| t as f64 / present.len() as f64),
            );
            (user, row)
        })
        .collect()
}

/// Writes one batch's file with nullable amounts (`{"user","amount","ts"}`).
fn add_with_nulls(query: &mut Query, rows: &[(&str, Option<i64>, i64)]) {
    let with_amount: Vec<(&str, i64, i64)> = rows.iter().map(|(u, a, t)| (*u, a.unwrap_or(0), *t)).collect();
    query.add(&with_amount);
    // Rewrite the file so that the rows without an amount have none (a null).
    let dir = query.path().join("input");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("input").flatten().map(|e| e.path()).collect();
    files.sort();
    let last = files.last().expect("a file");
    let text: String = rows
        .iter()
        .map(|(user, amount, ts)| match amount {
            Some(amount) => format!("{{\"user\":\"{user}\",\"amount\":{amount},\"ts\":{}}}\n", ts * 1_000_000),
            None => format!("{{\"user\":\"{user}\",\"ts\":{}}}\n", ts * 1_000_000),
        })
        .collect();
    std::fs::write(last, text).expect("file");
}

#[test]
fn update_mode_outputs_each_changed_group_s_running_totals_late_rows_and_nulls_included() {
    // A watermark of 5 s: the row at ts 1 in the last batch is far behind it, but a
    // running aggregate keeps no window, so no row is late (as in Spark).
    let batches: Vec<Vec<(&str, Option<i64>, i64)>> = vec![
        vec![("a", Some(5), 10), ("b", Some(7), 11), ("a", Some(-2), 12)],
        vec![("c", None, 40), ("a", Some(1), 41)],
        vec![("b", Some(3), 1), ("c", Some(9), 70), ("c", None, 71)],
    ];
    let mut query = Query::new(TOTALS, Some(5));
    for batch in &batches[..2] {
        add_with_nulls(&mut query, batch);
    }
    query.run();
    // A restart with the same checkpoint continues the totals.
    add_with_nulls(&mut query, &batches[2]);
    query.run();
    // Batches that only moved the watermark output nothing: compare the others in order.
    let output: Vec<Vec<Value>> = query.output().into_values().filter(|rows| !rows.is_empty()).collect();
    assert_eq!(output.len(), 3, "{output:?}");
    let mut seen: Vec<(String, Option<i64>)> = Vec::new();
    for (index, batch) in batches.iter().enumerate() {
        seen.extend(batch.iter().map(|(user, amount, _)| (user.to_string(), *amount)));
        let changed: BTreeSet<&str> = batch.iter().map(|(user, _, _)| *user).collect();
        let expected: Vec<TotalsRow> =
            reference(&seen).into_iter().filter(|(user, _)| changed.contains(user.as_str())).map(|(_, r)| r).collect();
        let printed: Vec<TotalsRow> = output[index].iter().map(totals_row).collect();
        assert_eq!(printed, expected, "batch {index}");
    }
    // The state holds each user's aggregates, readable with `eddy state`.
    let checkpoint = query.path().join("checkpoint");
    let state = check(&eddy(&["state", "read", checkpoint.to_str().expect("path"), "--operator", "totals"]));
    let entries: Vec<Value> = state.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    let users: BTreeSet<&str> = entries.iter().map(|e| e["key"][0].as_str().expect("key")).collect();
    assert_eq!((entries.len(), users), (3, BTreeSet::from(["a", "b", "c"])));
    assert!(entries.iter().all(|e| e["var"] == "aggregates" && e["kind"] == "value"), "{state}");
}

#[test]
fn complete_mode_outputs_every_group_every_batch_and_refuses_past_its_limit() {
    let batches: Vec<Vec<(&str, Option<i64>, i64)>> =
        vec![vec![("a", Some(1), 1), ("b", Some(2), 2)], vec![("a", Some(3), 3)], vec![("c", Some(4), 4)]];
    let mut query = Query::new(&format!("{TOTALS}output-mode = \"complete\"\n"), None);
    for batch in &batches {
        add_with_nulls(&mut query, batch);
    }
    query.run();
    let output = query.output();
    let mut seen = Vec::new();
    for (index, batch) in batches.iter().enumerate() {
        seen.extend(batch.iter().map(|(user, amount, _)| (user.to_string(), *amount)));
        let expected: Vec<TotalsRow> = reference(&seen).into_values().collect();
        let printed: Vec<TotalsRow> = output[&(index as u64)].iter().map(totals_row).collect();
        assert_eq!(printed, expected, "batch {index}");
    }

    // Two groups allowed: the batch that makes a third fails, and nothing of it lands.
    let mut limited = Query::new(&format!("{TOTALS}output-mode = \"complete\"\nmax-complete-rows = 2\n"), None);
    add_with_nulls(&mut limited, &batches[0]);
    limited.run();
    add_with_nulls(&mut limited, &batches[2]);
    let spec = limited.path().join("pipeline.toml");
    let checkpoint = limited.path().join("checkpoint");
    let failed = eddy(&["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]);
    let error = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success() && error.contains("more than max-complete-rows (2)"), "{error}");
    assert_eq!(limited.output().len(), 1, "the failed batch published nothing");
    let state = check(&eddy(&["state", "read", checkpoint.to_str().expect("path"), "--operator", "totals"]));
    assert_eq!(state.lines().count(), 2, "the failed batch committed nothing: {state}");
}

#[test]
fn groups_alike_in_their_first_bytes_come_out_in_key_order() {
    // A group key is stored as a type tag, a length and the bytes, and sorted by its
    // first 16 bytes held inline: keys of one length alike in their first 11 characters
    // tie there and are ordered by the rest.
    let users = ["customer-0001-c", "customer-0001-a", "customer-0002-a", "customer-0001-b"];
    let batch: Vec<(&str, Option<i64>, i64)> =
        users.iter().enumerate().map(|(i, user)| (*user, Some(i as i64), i as i64)).collect();
    let mut query = Query::new(TOTALS, None);
    add_with_nulls(&mut query, &batch);
    query.run();
    let printed: Vec<TotalsRow> = query.output()[&0].iter().map(totals_row).collect();
    let seen: Vec<(String, Option<i64>)> = batch.iter().map(|(user, amount, _)| (user.to_string(), *amount)).collect();
    let expected: Vec<TotalsRow> = reference(&seen).into_values().collect();
    assert_eq!(printed, expected);
}

#[test]
fn without_group_by_every_row_is_one_group() {
    let stage = "[[stage]]\nname = \"all\"\n[stage.aggregate]\naggregates = [\"count\", \"sum(amount) as total\"]\n";
    let mut query = Query::new(stage, None);
    query.add(&[("a", 5, 1), ("b", 7, 2)]);
    query.add(&[("c", -1, 3)]);
    query.run();
    let totals: Vec<(i64, i64)> = query
        .output()
        .values()
        .flatten()
        .map(|row| (row["count"].as_i64().expect("count"), row["total"].as_i64().expect("total")))
        .collect();
    assert_eq!(totals, [(2, 12), (3, 11)]);
}

#[test]
fn append_mode_and_a_stateful_stage_after_it_are_refused_with_spark_s_reasons() {
    let append = Query::new(&format!("{TOTALS}output-mode = \"append\"\n"), Some(5));
    let output = eddy(&["run", append.path().join("pipeline.toml").to_str().expect("path")]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && error.contains("stage[0].aggregate.output-mode") && error.contains("never final"),
        "{error}"
    );
    let chained = Query::new(
        &format!("{TOTALS}\n[[stage]]\nname = \"again\"\n[stage.dedup]\nkey = [\"user\"]\nstate = \"forever\"\n"),
        None,
    );
    let output = eddy(&["run", chained.path().join("pipeline.toml").to_str().expect("path")]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && error.contains("it follows stage 'totals'"), "{error}");
}
