//! Tests of the state reader.

use super::*;
use crate::contract::Scalar;
use crate::state::{KeyScope, StateStore, VariableDecl, check, schema_entry};

fn cbor<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("cbor");
    out
}

fn decl(name: &str, kind: StateKind, ttl_us: Option<u64>) -> VariableDecl {
    VariableDecl { name: name.into(), kind, ttl_us }
}

const GROUPS: u16 = 16;
const NOW: i64 = 1_000_000;

fn scope(user: &str) -> KeyScope {
    let encoded = key::encode(&[Scalar::Utf8(user.into())]);
    KeyScope::new(0, key::key_group(&encoded, GROUPS), &encoded, NOW)
}

/// A store with: alice's totals (value), events (list), counts (map, 2 entries),
/// a timer; bob's totals; a TTL'd value `session` for bob that expires at NOW + 10.
fn sample(dir: &Path) -> StateStore {
    let store = StateStore::open(dir).expect("open");
    let mut txn = store.begin();
    let totals = decl("totals", StateKind::Value, None);
    let events = decl("events", StateKind::List, None);
    let counts = decl("counts", StateKind::Map, None);
    let session = decl("session", StateKind::Value, Some(10));
    let alice = scope("alice");
    alice.value_update(&mut txn, &totals, &cbor(&serde_json::json!({"count": 4, "sum": 69})));
    alice.list_put(&mut txn, &events, &[cbor(&1), cbor(&"two")]);
    alice.map_update(&mut txn, &counts, &cbor(&"x"), &cbor(&3));
    alice.map_update(&mut txn, &counts, &cbor(&"y"), &cbor(&5));
    alice.timer_register(&mut txn, 2_000_000);
    let bob = scope("bob");
    bob.value_update(&mut txn, &totals, &cbor(&serde_json::json!({"count": 1, "sum": 7})));
    bob.value_update(&mut txn, &session, &[0xff, 0x00]);
    store.commit(txn, 3).expect("commit");
    store
}

fn alice_filter(var: &str) -> EntryFilter {
    EntryFilter { operator: 0, variable: Some(var.into()), key: Some(vec!["alice".into()]) }
}

#[test]
fn reads_values_lists_and_maps_with_inferred_kinds() {
    let dir = tempfile::tempdir().unwrap();
    drop(sample(dir.path()));
    let reader = StateReader::open(dir.path()).expect("reader");
    let totals = reader.entries(&alice_filter("totals"), NOW).unwrap();
    assert_eq!(totals.len(), 1);
    assert_eq!(totals[0].kind, StateKind::Value);
    assert_eq!(totals[0].value, serde_json::json!({"count": 4, "sum": 69}));
    assert_eq!(totals[0].expires_at, serde_json::Value::Null);
    let line = serde_json::to_value(&totals[0]).unwrap();
    assert_eq!(line["key"], serde_json::json!(["alice"]));
    assert_eq!(line["var"], "totals");
    assert_eq!(line["kind"], "value");
    assert!(line.get("mapKey").is_none() && line.get("expired").is_none());

    let events = reader.entries(&alice_filter("events"), NOW).unwrap();
    assert_eq!(events[0].kind, StateKind::List);
    assert_eq!(events[0].value, serde_json::json!([1, "two"]));
    assert_eq!(events[0].expires_at, serde_json::Value::Null);

    let counts = reader.entries(&alice_filter("counts"), NOW).unwrap();
    assert_eq!(counts.len(), 2);
    assert!(counts.iter().all(|entry| entry.kind == StateKind::Map));
    assert_eq!(counts[0].map_key, Some("x".into()));
    assert_eq!(counts[1].value, serde_json::json!(5));

    let all = reader.entries(&EntryFilter::default(), NOW).unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(reader.committed_batch().unwrap(), Some(3));
}

#[test]
fn key_filter_works_with_and_without_key_groups() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample(dir.path());
    let bob = EntryFilter { operator: 0, variable: None, key: Some(vec!["bob".into()]) };
    let names = |reader: &StateReader| -> Vec<String> {
        reader.entries(&bob, NOW).unwrap().into_iter().map(|entry| entry.var).collect()
    };
    assert_eq!(names(&StateReader::open(dir.path()).unwrap()), ["totals", "session"]);
    // With the schema's key-group count, the key's entries are read as one range.
    let schema = OperatorStateSchema {
        key_columns: vec!["user".into()],
        key_groups: GROUPS,
        variables: vec![],
        module_sha256: "00".into(),
        stage: String::new(),
        window_aggregates: Vec::new(),
        timers_by_key: true,
        timers_packed: true,
    };
    store.write_meta(&schema_key(0), &serde_json::to_vec(&schema).unwrap()).unwrap();
    let reader = StateReader::open(dir.path()).unwrap();
    assert_eq!(reader.schema(0).unwrap().map(|schema| schema.key_groups), Some(GROUPS));
    assert_eq!(names(&reader), ["totals", "session"]);
    let nobody = EntryFilter { operator: 0, variable: None, key: Some(vec!["carol".into()]) };
    assert!(reader.entries(&nobody, NOW).unwrap().is_empty());
}

#[test]
fn flags_expired_entries_and_shows_non_cbor_bytes() {
    let dir = tempfile::tempdir().unwrap();
    drop(sample(dir.path()));
    let reader = StateReader::open(dir.path()).unwrap();
    let filter = EntryFilter { operator: 0, variable: Some("session".into()), key: None };
    let live = reader.entries(&filter, NOW).unwrap();
    assert!(!live[0].expired);
    assert_eq!(live[0].expires_at, serde_json::Value::String(format_micros_iso(NOW + 10)));
    assert_eq!(live[0].value, serde_json::json!({"bytes": "ff00"}));
    let later = reader.entries(&filter, NOW + 10).unwrap();
    assert!(later[0].expired);
    assert_eq!(serde_json::to_value(&later[0]).unwrap()["expired"], true);
}

#[test]
fn ttl_lists_show_per_element_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut txn = store.begin();
    scope("alice").list_put(&mut txn, &decl("recent", StateKind::List, Some(5)), &[cbor(&"a")]);
    store.commit(txn, 0).unwrap();
    let reader = StateReader::open(dir.path()).unwrap();
    let entries = reader.entries(&alice_filter("recent"), NOW + 5).unwrap();
    assert_eq!(entries[0].kind, StateKind::List);
    assert_eq!(entries[0].expires_at, serde_json::json!([format_micros_iso(NOW + 5)]));
    assert!(entries[0].expired);
}

#[test]
fn declared_schema_overrides_inference() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample(dir.path());
    // `session` holds non-CBOR bytes; declared as a value it stays a value.
    let schema = OperatorStateSchema {
        key_columns: vec!["user".into()],
        key_groups: GROUPS,
        variables: vec![decl("session", StateKind::Value, Some(10))],
        module_sha256: "00".into(),
        stage: String::new(),
        window_aggregates: Vec::new(),
        timers_by_key: true,
        timers_packed: true,
    };
    store.write_meta(&schema_key(0), &serde_json::to_vec(&schema).unwrap()).unwrap();
    let reader = StateReader::open(dir.path()).unwrap();
    let meta = reader.metadata().unwrap();
    let names: Vec<_> = meta.operators[0].variables.iter().map(|v| (v.name.as_str(), v.kind, v.entries)).collect();
    assert_eq!(names[0], ("session", Some(StateKind::Value), 1));
    assert_eq!(meta.operators[0].variables[0].ttl_us, Some(10));
    assert_eq!(meta.operators[0].key_groups, Some(GROUPS));
    let bob = EntryFilter { operator: 0, variable: None, key: Some(vec!["bob".into()]) };
    assert_eq!(reader.entries(&bob, NOW).unwrap().len(), 2);
}

#[test]
fn reads_the_schema_the_engine_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample(dir.path());
    let engine_schema = OperatorStateSchema {
        key_columns: vec!["user".into()],
        key_groups: GROUPS,
        variables: vec![decl("events", StateKind::List, None)],
        module_sha256: "00".into(),
        stage: String::new(),
        window_aggregates: Vec::new(),
        timers_by_key: true,
        timers_packed: true,
    };
    let checkpoint = tempfile::tempdir().unwrap();
    let found = check(&store, 0, &engine_schema, &[], &CheckpointDir::new(checkpoint.path())).unwrap();
    assert!(found.record && found.delete.is_empty(), "new: to record");
    let (key, value) = schema_entry(0, &engine_schema).unwrap();
    store.write_meta(&key, &value).unwrap();
    let schema = StateReader::open(dir.path()).unwrap().schema(0).unwrap().expect("schema");
    assert_eq!(schema, engine_schema);
}

#[test]
fn metadata_counts_keys_variables_and_timers() {
    let dir = tempfile::tempdir().unwrap();
    drop(sample(dir.path()));
    let meta = StateReader::open(dir.path()).unwrap().metadata().unwrap();
    assert_eq!(meta.committed_batch, Some(3));
    assert_eq!(meta.operators.len(), 1);
    let op = &meta.operators[0];
    assert_eq!((op.operator, op.keys, op.timers), (0, 2, 1));
    let vars: BTreeMap<_, _> = op.variables.iter().map(|v| (v.name.as_str(), (v.kind, v.entries))).collect();
    assert_eq!(vars["totals"], (Some(StateKind::Value), 2));
    assert_eq!(vars["events"], (Some(StateKind::List), 1));
    assert_eq!(vars["counts"], (Some(StateKind::Map), 2));
}

#[test]
fn reads_timers() {
    let dir = tempfile::tempdir().unwrap();
    drop(sample(dir.path()));
    let reader = StateReader::open(dir.path()).unwrap();
    let timers = reader.timers(0, None).unwrap();
    assert_eq!(timers.len(), 1);
    assert_eq!(timers[0].key, vec![serde_json::json!("alice")]);
    assert_eq!(timers[0].expiry, 2_000_000);
    assert_eq!(timers[0].expires_at, "1970-01-01T00:00:02.000Z");
    assert!(reader.timers(0, Some(&["bob".into()])).unwrap().is_empty());
    assert!(reader.timers(1, None).unwrap().is_empty());
}

#[test]
fn reads_while_the_store_is_open_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample(dir.path());
    let reader = StateReader::open(dir.path()).expect("read-only open next to a running query");
    assert!(reader._secondary.is_none(), "read-only mode works while the writer holds the lock");
    assert_eq!(reader.committed_batch().unwrap(), Some(3));
    assert_eq!(reader.entries(&EntryFilter::default(), NOW).unwrap().len(), 6);
    // A later commit shows in a reader opened after it; the writer keeps working.
    let mut txn = store.begin();
    scope("carol").value_update(&mut txn, &decl("totals", StateKind::Value, None), &cbor(&1));
    store.commit(txn, 4).unwrap();
    let again = StateReader::open(dir.path()).unwrap();
    assert_eq!(again.committed_batch().unwrap(), Some(4));
    assert_eq!(again.entries(&EntryFilter::default(), NOW).unwrap().len(), 7);
    drop(reader);
    let mut txn = store.begin();
    scope("dave").value_update(&mut txn, &decl("totals", StateKind::Value, None), &cbor(&1));
    store.commit(txn, 5).expect("the writer is not disturbed by readers");
}

#[test]
fn reads_committed_changes_the_state_family_does_not_have_yet() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample(dir.path());
    assert!(store.hold_state_in_memory(1 << 20).unwrap());
    let (totals, counts) = (decl("totals", StateKind::Value, None), decl("counts", StateKind::Map, None));
    let mut txn = store.begin();
    scope("carol").value_update(&mut txn, &totals, &cbor(&1));
    scope("alice").map_remove(&mut txn, &counts, &cbor(&"x"));
    scope("bob").value_update(&mut txn, &totals, &cbor(&serde_json::json!({"count": 2, "sum": 9})));
    store.commit(txn, 4).unwrap();
    assert!(store.read(Cf::Meta, unwritten::UNWRITTEN_FROM).unwrap().is_some(), "batch 4 is in the change log only");
    let check = |reader: &StateReader| {
        let all = reader.entries(&EntryFilter::default(), NOW).unwrap();
        let shown: Vec<(serde_json::Value, &str, Option<serde_json::Value>, serde_json::Value)> = all
            .iter()
            .map(|entry| (entry.key[0].clone(), entry.var.as_str(), entry.map_key.clone(), entry.value.clone()))
            .collect();
        let mut shown = shown;
        shown.sort_by_key(|entry| format!("{entry:?}"));
        let mut expected = vec![
            ("alice".into(), "counts", Some("y".into()), serde_json::json!(5)),
            ("alice".into(), "events", None, serde_json::json!([1, "two"])),
            ("alice".into(), "totals", None, serde_json::json!({"count": 4, "sum": 69})),
            ("bob".into(), "session", None, serde_json::json!({"bytes": "ff00"})),
            ("bob".into(), "totals", None, serde_json::json!({"count": 2, "sum": 9})),
            ("carol".into(), "totals", None, serde_json::json!(1)),
        ];
        expected.sort_by_key(|entry| format!("{entry:?}"));
        assert_eq!(shown, expected);
        assert_eq!(reader.metadata().unwrap().operators[0].keys, 3);
        assert_eq!(reader.committed_batch().unwrap(), Some(4));
    };
    check(&StateReader::open(dir.path()).unwrap());
    // Reopened (as after a crash), the store writes them from its change log.
    drop(store);
    let store = StateStore::open(dir.path()).unwrap();
    assert!(store.read(Cf::Meta, unwritten::UNWRITTEN_FROM).unwrap().is_none(), "caught up");
    drop(store);
    check(&StateReader::open(dir.path()).unwrap());
}

#[test]
fn missing_store_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let error = StateReader::open_checkpoint(dir.path()).err().expect("no store");
    assert!(error.to_string().contains("has the query run with this checkpoint?"), "{error}");
    let error = StateReader::open_checkpoint(&dir.path().join("nope")).err().expect("no dir");
    assert!(error.to_string().contains("does not exist"), "{error}");
}

#[test]
fn a_batch_written_ahead_of_its_commit_is_not_read_until_it_commits() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store_dir = crate::checkpoint::CheckpointDir::new(dir.path()).store_dir();
    let store = StateStore::open(&store_dir)?;
    let mut first = store.begin();
    first.put(Cf::State, b"a".to_vec(), b"1".to_vec());
    store.commit(first, 0)?;
    let mut txn = store.begin();
    txn.put(Cf::State, b"a".to_vec(), b"2".to_vec());
    assert!(store.write_ahead_over(&mut txn, 1, 0)?);
    let value = |reader: &StateReader| -> Result<Option<Vec<u8>>> {
        let mut found = None;
        reader.scan_state(b"a", |_, value| {
            found = Some(value.to_vec());
            Ok(())
        })?;
        Ok(found)
    };
    let reader = StateReader::open_checkpoint(dir.path())?;
    assert_eq!(reader.committed_batch()?, Some(0));
    assert_eq!(value(&reader)?, Some(b"1".to_vec()), "batch 1 is not committed yet");
    drop(reader);
    store.commit(txn, 1)?;
    let reader = StateReader::open_checkpoint(dir.path())?;
    assert_eq!(reader.committed_batch()?, Some(1));
    assert_eq!(value(&reader)?, Some(b"2".to_vec()));
    Ok(())
}

#[test]
fn the_changes_of_a_batch_written_ahead_are_its_last_change_of_each_entry() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = StateStore::open(&dir.path().join("store"))?;
    let counts = decl("counts", StateKind::Map, None);
    let alice = scope("alice");
    let mut txn = store.begin();
    alice.map_update(&mut txn, &counts, &cbor(&"x"), &cbor(&1));
    alice.map_update(&mut txn, &counts, &cbor(&"y"), &cbor(&2));
    assert!(store.write_ahead_over(&mut txn, 0, 0)?);
    alice.map_update(&mut txn, &counts, &cbor(&"x"), &cbor(&3));
    alice.map_remove(&mut txn, &counts, &cbor(&"y"));
    store.commit(txn, 0)?;
    drop(store);
    let reader = StateReader::open(&dir.path().join("store"))?;
    let changes: Vec<(&str, serde_json::Value)> =
        reader.changes(0, 0, 0)?.iter().map(|change| (change.change, change.entry.value.clone())).collect();
    assert_eq!(changes, vec![("update", serde_json::json!(3)), ("delete", serde_json::Value::Null)]);
    Ok(())
}
