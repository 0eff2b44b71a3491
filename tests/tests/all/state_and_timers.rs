//! State variables and timers through the real boundary: the `scripted` component on
//! a real RocksDB store.

use std::collections::BTreeMap;

use eddy::pipeline::InstanceLimits;
use eddy::state::StateStore;
use eddy_tests::{Scripted, cmd, load};
use serde_json::{Value, json};

fn config(time_mode: &str, vars: &[(&str, &str, Option<u64>)]) -> Value {
    let state: Vec<Value> = vars
        .iter()
        .map(|(name, kind, ttl_ms)| match ttl_ms {
            Some(ttl) => json!({"name": name, "kind": kind, "ttl_ms": ttl}),
            None => json!({"name": name, "kind": kind}),
        })
        .collect();
    json!({"time_mode": time_mode, "state": state})
}

/// Only the rows that report a read (mutations' acknowledgements are left out).
fn reads(rows: Vec<(String, String)>) -> Vec<(String, String)> {
    const READS: [&str; 9] = ["get", "exists", "contains", "keys", "values", "entries", "list", "fired", "timer.list"];
    rows.into_iter().filter(|(op, _)| READS.iter().any(|suffix| op.ends_with(suffix))).collect()
}

fn row(op: &str, result: &str) -> (String, String) {
    (op.to_string(), result.to_string())
}

#[test]
fn every_kind_of_state_survives_batches_and_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let vars = config("none", &[("v", "value", None), ("l", "list", None), ("m", "map", None)]);
    let module = load("scripted");
    {
        let store = StateStore::open(&dir.path().join("state")).expect("store");
        let mut p = Scripted::open(&module, store, vars.clone(), InstanceLimits::default());
        p.run(
            1_000,
            &[
                cmd("a", "value.set", "v").v("one"),
                cmd("a", "list.append", "l").v("x"),
                cmd("a", "map.put", "m").k("k2").v("v2"),
                cmd("b", "value.set", "v").v("two"),
            ],
        )
        .expect("batch 0");
        let seen = reads(
            p.run(
                2_000,
                &[
                    cmd("a", "list.append", "l").v("y"),
                    cmd("a", "map.put", "m").k("k1").v("v1"),
                    cmd("a", "list.get", "l"),
                    cmd("a", "value.get", "v"),
                ],
            )
            .expect("batch 1"),
        );
        assert_eq!(seen, vec![row("list.get", r#"["x","y"]"#), row("value.get", r#""one""#)]);
    }
    // A new store handle and a new instance: everything comes back from RocksDB.
    let store = StateStore::open(&dir.path().join("state")).expect("store reopens");
    assert_eq!(store.committed_batch().expect("readable"), Some(1));
    let mut p = Scripted::open(&module, store, vars, InstanceLimits::default());
    let a = reads(
        p.run(
            3_000,
            &[
                cmd("a", "value.get", "v"),
                cmd("a", "list.get", "l"),
                cmd("a", "map.entries", "m"),
                cmd("a", "map.keys", "m"),
                cmd("a", "map.values", "m"),
                cmd("a", "map.get", "m").k("k1"),
                cmd("a", "map.contains", "m").k("nope"),
                cmd("a", "map.exists", "m"),
            ],
        )
        .expect("batch 2"),
    );
    assert_eq!(
        a,
        vec![
            row("value.get", r#""one""#),
            row("list.get", r#"["x","y"]"#),
            row("map.entries", r#"{"k1":"v1","k2":"v2"}"#),
            row("map.keys", r#"["k1","k2"]"#),
            row("map.values", r#"["v1","v2"]"#),
            row("map.get", r#""v1""#),
            row("map.contains", "false"),
            row("map.exists", "true"),
        ]
    );
    let b = reads(
        p.run(4_000, &[cmd("b", "value.get", "v"), cmd("b", "list.get", "l"), cmd("b", "map.exists", "m")])
            .expect("batch 3"),
    );
    assert_eq!(b, vec![row("value.get", r#""two""#), row("list.get", "[]"), row("map.exists", "false")]);
}

#[test]
fn writes_are_visible_within_their_batch_and_clears_remove() {
    let vars = config("none", &[("v", "value", None), ("l", "list", None), ("m", "map", None)]);
    let mut p = Scripted::new(vars, InstanceLimits::default());
    let seen = reads(
        p.run(
            1_000,
            &[
                cmd("a", "value.set", "v").v("1"),
                cmd("a", "value.get", "v"),
                cmd("a", "list.put", "l").v(r#"["p","q"]"#),
                cmd("a", "list.get", "l"),
                cmd("a", "map.put", "m").k("x").v("1"),
                cmd("a", "map.remove", "m").k("x"),
                cmd("a", "map.get", "m").k("x"),
            ],
        )
        .expect("batch 0"),
    );
    assert_eq!(seen, vec![row("value.get", r#""1""#), row("list.get", r#"["p","q"]"#), row("map.get", "null")]);
    let seen = reads(
        p.run(
            2_000,
            &[
                cmd("a", "value.clear", "v"),
                cmd("a", "list.clear", "l"),
                cmd("a", "map.put", "m").k("y").v("2"),
                cmd("a", "map.clear", "m"),
                cmd("a", "value.exists", "v"),
                cmd("a", "list.exists", "l"),
                cmd("a", "map.exists", "m"),
            ],
        )
        .expect("batch 1"),
    );
    assert_eq!(seen, vec![row("value.exists", "false"), row("list.exists", "false"), row("map.exists", "false")]);
}

#[test]
fn ttl_hides_expired_values_of_every_kind() {
    let vars = config("none", &[("v", "value", Some(500)), ("l", "list", Some(500)), ("m", "map", Some(500))]);
    let mut p = Scripted::new(vars, InstanceLimits::default());
    p.run(
        1_000,
        &[
            cmd("a", "value.set", "v").v("old"),
            cmd("a", "list.append", "l").v("first"),
            cmd("a", "map.put", "m").k("early").v("1"),
        ],
    )
    .expect("batch 0");
    // 1.3 s: written at 1.0 s with a 0.5 s TTL, still alive; more is written.
    let seen = reads(
        p.run(
            1_300,
            &[
                cmd("a", "value.get", "v"),
                cmd("a", "list.append", "l").v("second"),
                cmd("a", "map.put", "m").k("late").v("2"),
                cmd("a", "list.get", "l"),
            ],
        )
        .expect("batch 1"),
    );
    assert_eq!(seen, vec![row("value.get", r#""old""#), row("list.get", r#"["first","second"]"#)]);
    // 1.5 s: the 1.0 s writes expire exactly now; the 1.3 s ones live until 1.8 s.
    let seen = reads(
        p.run(
            1_500,
            &[
                cmd("a", "value.get", "v"),
                cmd("a", "value.exists", "v"),
                cmd("a", "list.get", "l"),
                cmd("a", "map.entries", "m"),
            ],
        )
        .expect("batch 2"),
    );
    assert_eq!(
        seen,
        vec![
            row("value.get", "null"),
            row("value.exists", "false"),
            row("list.get", r#"["second"]"#),
            row("map.entries", r#"{"late":"2"}"#),
        ]
    );
    let seen = reads(p.run(1_800, &[cmd("a", "list.get", "l"), cmd("a", "map.exists", "m")]).expect("batch 3"));
    assert_eq!(seen, vec![row("list.get", "[]"), row("map.exists", "false")]);
}

#[test]
fn expired_entries_are_evicted_from_the_store_by_batch_time() {
    use eddy::state::Cf;
    let vars = config(
        "none",
        &[("v", "value", Some(500)), ("l", "list", Some(500)), ("m", "map", Some(500)), ("keep", "value", None)],
    );
    let mut p = Scripted::new(vars, InstanceLimits::default());
    p.run(
        1_000,
        &[
            cmd("a", "value.set", "v").v("x"),
            cmd("a", "list.append", "l").v("first"),
            cmd("a", "map.put", "m").k("k").v("1"),
            cmd("a", "value.set", "keep").v("forever"),
        ],
    )
    .expect("batch 0");
    p.run(1_200, &[cmd("a", "list.append", "l").v("second")]).expect("batch 1");
    let entries = |p: &Scripted| p.store.begin().scan_prefix(Cf::State, &[]).expect("scan").len();
    assert_eq!(entries(&p), 4);
    assert_eq!(p.last_evicted, 0);
    // 1.5 s: the value, the first list element and the map entry expire; no input is needed.
    p.run(1_500, &[]).expect("batch 2");
    assert_eq!(p.last_evicted, 3);
    assert_eq!(entries(&p), 2, "the untimed value and the list with its live element remain");
    p.run(1_700, &[]).expect("batch 3");
    assert_eq!((p.last_evicted, entries(&p)), (1, 1));
    assert!(p.store.begin().scan_prefix(Cf::TtlIndex, &[]).expect("scan").is_empty(), "the TTL index is emptied too");
}

#[test]
fn processing_time_timers_are_per_key_and_fire_in_order() {
    let mut p = Scripted::new(config("processing-time", &[]), InstanceLimits::default());
    p.run(
        1_000,
        &[
            cmd("a", "timer.register", "").v("5000000"),
            cmd("a", "timer.register", "").v("3000000"),
            cmd("a", "timer.register", "").v("3000000"),
            cmd("b", "timer.register", "").v("4000000"),
        ],
    )
    .expect("batch 0");
    let a = reads(
        p.run(
            1_100,
            &[cmd("a", "timer.list", ""), cmd("a", "timer.delete", "").v("5000000"), cmd("a", "timer.list", "")],
        )
        .expect("batch 1"),
    );
    assert_eq!(a, vec![row("timer.list", "[3000000,5000000]"), row("timer.list", "[3000000]")]);
    let b = reads(p.run(1_200, &[cmd("b", "timer.list", "")]).expect("batch 2"));
    assert_eq!(b, vec![row("timer.list", "[4000000]")]);
    // No input at all: due timers still fire, earliest first, and only those due.
    assert_eq!(reads(p.run(3_500, &[]).expect("batch 3")), vec![row("timer.fired", "3000000")]);
    assert_eq!(reads(p.run(10_000, &[]).expect("batch 4")), vec![row("timer.fired", "4000000")]);
    assert_eq!(reads(p.run(20_000, &[cmd("a", "timer.list", "")]).expect("batch 5")), vec![row("timer.list", "[]")]);
}

#[test]
fn event_time_timers_fire_when_the_watermark_passes_them() {
    let mut p = Scripted::new(config("event-time", &[]), InstanceLimits::default());
    p.run_at(1_000, None, &[cmd("a", "timer.register", "").v("2000000"), cmd("b", "timer.register", "").v("1500000")])
        .expect("batch 0");
    assert_eq!(reads(p.run_at(99_000, Some(1_000), &[]).expect("batch 1")), vec![]);
    // Both fire (key after key: in no time order across keys).
    let mut fired = reads(p.run_at(99_000, Some(2_000), &[]).expect("batch 2"));
    fired.sort();
    assert_eq!(fired, vec![row("timer.fired", "1500000"), row("timer.fired", "2000000")]);
}

/// The SDK refuses timers without a time mode before the host has to (the host refuses
/// too, for guests written without the SDK).
#[test]
fn timers_need_a_time_mode() {
    let mut p = Scripted::new(config("none", &[]), InstanceLimits::default());
    let error = p.run(1_000, &[cmd("a", "timer.register", "").v("5")]).expect_err("no time mode");
    assert_eq!(
        error.to_string(),
        "module 'scripted.wasm' failed in handle-input-rows for key [\"a\"]: row 0 (timer.register): timers need a time mode: \
         call `ctx.set_time_mode(TimeMode::ProcessingTime)` (or `EventTime`) in init"
    );
}

/// A pass's due timers are fixed when it starts and handed over many per call: a timer
/// an earlier handler of the pass deleted does not fire, and one a handler registers
/// (already due) fires in the next batch. Timers fire key after key, each key's in
/// expiry order (the 600 keys' two timers each are far apart in time, yet fire one
/// after the other). The scripted processor's handler of a timer ending in 1 deletes
/// the key's timer one microsecond later and registers one two microseconds later.
#[test]
fn a_timer_deleted_by_an_earlier_handler_of_the_pass_does_not_fire() {
    let mut p = Scripted::new(config("processing-time", &[]), InstanceLimits::default());
    let keys: Vec<String> = (0..600).map(|i| format!("k{i}")).collect();
    // Each key's timers: an early one and a late one; every expiry names its key.
    let mut key_of: BTreeMap<i64, &str> = BTreeMap::from([(1001, "a"), (1500, "b")]);
    let mut commands = vec![
        cmd("a", "timer.register", "").v("1001"),
        cmd("a", "timer.register", "").v("1002"),
        cmd("b", "timer.register", "").v("1500"),
    ];
    let timers: Vec<(&str, i64, String)> = keys
        .iter()
        .enumerate()
        .flat_map(|(i, key)| {
            [2_000 + i as i64 * 10, 9_000 + i as i64 * 10].map(|at| (key.as_str(), at, at.to_string()))
        })
        .collect();
    for (key, at, text) in &timers {
        key_of.insert(*at, key);
        commands.push(cmd(key, "timer.register", "").v(text));
    }
    // Every timer is due at the batch's processing time (1 s): they fire in its pass.
    let fired: Vec<i64> = reads(p.run(1_000, &commands).expect("batch 0"))
        .into_iter()
        .map(|(op, at)| {
            assert_eq!(op, "timer.fired");
            at.parse().expect("an expiry")
        })
        .collect();
    let mut sorted = fired.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, key_of.keys().copied().collect::<Vec<_>>(), "1002 was deleted by 1001's handler");
    // Key after key: a key's timers are one run, in expiry order.
    let mut runs: Vec<(&str, Vec<i64>)> = Vec::new();
    for at in &fired {
        match runs.last_mut() {
            Some((key, expiries)) if *key == key_of[at] => expiries.push(*at),
            _ => runs.push((key_of[at], vec![*at])),
        }
    }
    assert_eq!(runs.len(), 602, "each key's timers fire one after the other");
    assert!(runs.iter().all(|(_, expiries)| expiries.is_sorted()), "a key's timers fire in expiry order");
    assert_eq!(
        reads(p.run(1_100, &[cmd("a", "timer.list", "")]).expect("batch 1")),
        vec![row("timer.list", "[1003]"), row("timer.fired", "1003")]
    );
    assert_eq!(reads(p.run(1_200, &[cmd("a", "timer.list", "")]).expect("batch 2")), vec![row("timer.list", "[]")]);
}

/// A call over several keys answers reads of the variables the last such call read
/// from entries it fetched for all of its keys at once (`state.prefetch`), when the
/// store holds its state in memory. Reads must still see each change the call made,
/// an entry dropped by a direct call (`map.clear`), a map too large to fetch, and
/// the state the batch before committed; and the same as when the store does not
/// hold its state in memory (every read then goes to the host). Each key's values
/// are its own (`k3` holds `a3`, `b3`, `x3`), so results compare in any key order.
#[test]
fn reads_of_fetched_entries_see_the_calls_own_changes() {
    let sorted = |rows: Vec<(String, String)>| {
        let mut results: Vec<String> = rows.into_iter().map(|(op, result)| format!("{op} {result}")).collect();
        results.sort();
        results
    };
    let expect = |rows: &[&str]| {
        let mut rows: Vec<String> = rows.iter().map(|row| row.to_string()).collect();
        rows.sort();
        rows
    };
    for in_memory in [true, false] {
        let vars = config("none", &[("v", "value", None), ("m", "map", None)]);
        let mut p = Scripted::new(vars, InstanceLimits::default());
        let keys = ["k1", "k2", "k3", "k4", "k5", "k6"];
        let mut first = Vec::new();
        for (n, key) in keys.iter().enumerate().map(|(i, key)| (i + 1, key)) {
            let [a, b, x] = [format!("a{n}"), format!("b{n}"), format!("x{n}")].map(|v| &*v.leak());
            first.push(cmd(key, "map.put", "m").k("a").v(a));
            first.push(cmd(key, "map.put", "m").k("b").v(b));
            first.push(cmd(key, "value.set", "v").v(x));
            first.push(cmd(key, "map.get", "m").k("a"));
            first.push(cmd(key, "value.get", "v"));
        }
        // More entries than a fetch takes for one key: k5's reads go to the host.
        first.push(cmd("k5", "map.put-many", "m").v("100x3"));
        assert_eq!(reads(p.run(1_000, &first).expect("batch 0")).len(), 12);
        if in_memory {
            assert!(p.store.hold_state_in_memory(64 << 20).expect("loads"), "the state fits in memory");
        }
        let second = [
            cmd("k1", "map.get", "m").k("a"),
            cmd("k1", "map.get", "m").k("zz"),
            cmd("k1", "map.contains", "m").k("b"),
            cmd("k1", "value.get", "v"),
            cmd("k2", "map.put", "m").k("a").v("a2'"),
            cmd("k2", "map.get", "m").k("a"),
            cmd("k2", "map.remove", "m").k("b"),
            cmd("k2", "map.get", "m").k("b"),
            cmd("k3", "map.clear", "m"),
            cmd("k3", "map.get", "m").k("b"),
            cmd("k4", "value.clear", "v"),
            cmd("k4", "value.get", "v"),
            cmd("k4", "map.get", "m").k("a"),
            cmd("k5", "map.get", "m").k("50"),
            cmd("k5", "map.get", "m").k("a"),
            cmd("k6", "map.put", "m").k("c").v("c6"),
            cmd("k6", "map.get", "m").k("c"),
            cmd("k6", "map.get", "m").k("b"),
        ];
        let seen = sorted(reads(p.run(2_000, &second).expect("batch 1")));
        let expected = [
            r#"map.get "a1""#,
            "map.get null",
            "map.contains true",
            r#"value.get "x1""#,
            r#"map.get "a2'""#,
            "map.get null",
            "map.get null",
            "value.get null",
            r#"map.get "a4""#,
            r#"map.get "xxx""#,
            r#"map.get "a5""#,
            r#"map.get "c6""#,
            r#"map.get "b6""#,
        ];
        assert_eq!(seen, expect(&expected), "in memory: {in_memory}");
        // What the batch committed, read the same way by the next one.
        let third: Vec<_> = keys
            .iter()
            .flat_map(|key| {
                [cmd(key, "map.get", "m").k("a"), cmd(key, "map.get", "m").k("b"), cmd(key, "value.get", "v")]
            })
            .collect();
        let seen = sorted(reads(p.run(3_000, &third).expect("batch 2")));
        let expected = [
            [r#"map.get "a1""#, r#"map.get "b1""#, r#"value.get "x1""#],
            [r#"map.get "a2'""#, "map.get null", r#"value.get "x2""#],
            ["map.get null", "map.get null", r#"value.get "x3""#],
            [r#"map.get "a4""#, r#"map.get "b4""#, "value.get null"],
            [r#"map.get "a5""#, r#"map.get "b5""#, r#"value.get "x5""#],
            [r#"map.get "a6""#, r#"map.get "b6""#, r#"value.get "x6""#],
        ];
        assert_eq!(seen, expect(&expected.concat()), "in memory: {in_memory}");
    }
}
