//! Reading a query's state store from outside the query (`eddy state`), like Spark's
//! state data source: read-only, so it also works while the query runs.
//!
//! The store is opened with RocksDB's read-only mode, which takes no lock and sees
//! every batch committed when it opens (a run holding the store open is fine). If
//! read-only opening fails, it falls back to a secondary instance (catching up with
//! the primary). Values are shown decoded from CBOR (the SDK's encoding) into JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rocksdb::{DB, Direction, IteratorMode, Options, ReadOptions};
use serde::Serialize;

use super::entry_json::{StateEntry, decode_entry, decode_key, encode_key, hex, infer_kind};
use crate::checkpoint::CheckpointDir;
use crate::pipeline::AggregateFn;
use crate::state::{
    CF_NAMES, CHANGELOG, COMMITTED_BATCH, Cf, OperatorStateSchema, StateKind, changelog, copy_before, key, layout,
    packed, schema_key, timer_buckets, unwritten,
};
use crate::util::format_micros_iso;

/// What an operator's schema says about how to show its entries.
#[derive(Default)]
struct Declared {
    /// The kind of each declared variable.
    kinds: BTreeMap<String, StateKind>,
    /// The window stage's aggregate functions, which name the numbers of its windows.
    window_functions: Option<Vec<AggregateFn>>,
}

impl Declared {
    /// What `schema` declares; windows of aggregates this eddy does not know (a newer
    /// one's) are shown as their CBOR reads, without names.
    fn of(schema: Option<&OperatorStateSchema>) -> Declared {
        let Some(schema) = schema else { return Declared::default() };
        let names = &schema.window_aggregates;
        Declared {
            kinds: schema.variables.iter().map(|decl| (decl.name.clone(), decl.kind)).collect(),
            window_functions: (!names.is_empty())
                .then(|| names.iter().map(|name| AggregateFn::from_name(name)).collect::<Option<Vec<_>>>())
                .flatten(),
        }
    }

    /// An entry of `variable`'s kind: the declared one, else inferred from its bytes.
    fn kind(&self, variable: &str, rest: &[u8], value: Option<&[u8]>) -> StateKind {
        self.kinds
            .get(variable)
            .copied()
            .unwrap_or_else(|| value.map_or(StateKind::Value, |value| infer_kind(rest, value)))
    }
}

/// A read-only view of a state store.
pub struct StateReader {
    db: DB,
    path: PathBuf,
    /// Committed state changes the `state` family lacks, from the change log (see
    /// [`unwritten`]): read on top of the family.
    unwritten: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    // Keeps a secondary instance's own directory alive as long as the reader.
    _secondary: Option<tempfile::TempDir>,
}

/// What to read from the state CF.
#[derive(Clone, Debug, Default)]
pub struct EntryFilter {
    /// The operator whose state to read.
    pub operator: u16,
    /// Only this variable.
    pub variable: Option<String>,
    /// Only this grouping key (its values as JSON, as [`scalar_json`] shows them).
    pub key: Option<Vec<serde_json::Value>>,
}

/// One timer: one JSON line of `eddy state read --timers`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerEntry {
    /// The grouping key's values.
    pub key: Vec<serde_json::Value>,
    /// The key group of the key.
    pub key_group: u16,
    /// The time the timer is registered for (microseconds since the epoch).
    pub expiry: i64,
    /// The same as ISO time.
    pub expires_at: String,
}

/// A state store's summary: `eddy state metadata`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreMetadata {
    /// The store's directory.
    pub state_store: String,
    /// The last committed batch, if any.
    pub committed_batch: Option<u64>,
    /// Every operator with state or timers.
    pub operators: Vec<OperatorMetadata>,
}

/// One operator's part of [`StoreMetadata`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorMetadata {
    /// The operator id.
    pub operator: u16,
    /// The grouping columns, when the store records the schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_columns: Option<Vec<String>>,
    /// The key-group count, when the store records the schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_groups: Option<u16>,
    /// Grouping keys with at least one state entry.
    pub keys: u64,
    /// Registered timers.
    pub timers: u64,
    /// The variables found (and declared, when the store records the schema).
    pub variables: Vec<VariableMetadata>,
}

/// One variable's part of [`OperatorMetadata`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VariableMetadata {
    /// The variable's name.
    pub name: String,
    /// Its kind (declared, else inferred from its first entry).
    pub kind: Option<StateKind>,
    /// Its TTL in microseconds, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_us: Option<u64>,
    /// Entries in the store (a map entry per user key; a value or a whole list is one).
    pub entries: u64,
}

fn missing_store(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "no state store in {}: has the query run with this checkpoint? (pass the query's checkpoint directory)",
        path.display()
    )
}

impl StateReader {
    /// Opens the state store of the query checkpointed in `checkpoint` (its `state`
    /// directory; a store directory itself is accepted too).
    pub fn open_checkpoint(checkpoint: &Path) -> Result<Self> {
        if !checkpoint.exists() {
            bail!(
                "checkpoint directory {} does not exist (pass the query's checkpoint directory)",
                checkpoint.display()
            );
        }
        let store = CheckpointDir::new(checkpoint).store_dir();
        if !store.join("CURRENT").exists() && checkpoint.join("CURRENT").exists() {
            return Self::open_committed(checkpoint);
        }
        Self::open_committed(&store)
    }

    /// Opens the store in `path` read-only as of its last committed batch: while a batch
    /// whose changes were written ahead of its commit has not committed, the copy of
    /// the store from before it. A batch that commits (its copy going) while the store
    /// opens may show in part: the store is opened again.
    fn open_committed(path: &Path) -> Result<Self> {
        for _ in 0..8 {
            let before = copy_before(path)?;
            let reader = Self::open(path)?;
            let after = copy_before(path)?;
            let Some((batch, copy)) = after else {
                if before.is_some() {
                    continue;
                }
                return Ok(reader);
            };
            if reader.committed_batch()?.is_some_and(|committed| committed >= batch) {
                return Ok(reader);
            }
            match Self::open(&copy) {
                Ok(before) => return Ok(before),
                Err(_) if !copy.exists() => continue,
                Err(error) => return Err(error),
            }
        }
        bail!("the state store in {} changed while it was opened, eight times; try again", path.display())
    }

    /// Opens the store in `path` read-only. Works while a query holds it open.
    pub fn open(path: &Path) -> Result<Self> {
        if !path.join("CURRENT").exists() {
            return Err(missing_store(path));
        }
        let options = Options::default();
        let families = match DB::list_cf(&options, path) {
            Ok(families) => families,
            Err(e) => return Err(anyhow::Error::new(e).context(missing_store(path))),
        };
        if !CF_NAMES.iter().all(|name| families.iter().any(|f| f == name)) {
            bail!(
                "{} is not an eddy state store (it has column families {families:?}, expected {CF_NAMES:?})",
                path.display()
            );
        }
        match DB::open_cf_for_read_only(&options, path, &families, false) {
            Ok(db) => Self::with_unwritten(db, path, None),
            Err(read_only) => {
                let secondary =
                    tempfile::tempdir().context("cannot create a directory for a secondary store instance")?;
                let mut options = Options::default();
                options.set_max_open_files(-1);
                let db = DB::open_cf_as_secondary(&options, path, secondary.path(), &families).with_context(|| {
                    format!(
                        "cannot open the state store in {} for reading (read-only: {read_only}); check its permissions",
                        path.display()
                    )
                })?;
                db.try_catch_up_with_primary()
                    .with_context(|| format!("cannot catch up with the state store in {}", path.display()))?;
                Self::with_unwritten(db, path, Some(secondary))
            }
        }
    }

    /// The reader of `db`, with the change log of the batches its `state` family lacks
    /// read ahead.
    fn with_unwritten(db: DB, path: &Path, secondary: Option<tempfile::TempDir>) -> Result<Self> {
        let mut reader = Self { db, path: path.to_path_buf(), unwritten: BTreeMap::new(), _secondary: secondary };
        if let Some(raw) = reader.meta(unwritten::UNWRITTEN_FROM)? {
            let from = unwritten::decode_batch(&raw)?;
            reader.unwritten = unwritten::logged_since(&reader.db, reader.cf(CHANGELOG)?, from)
                .with_context(|| format!("in the change log of {}", path.display()))?;
        }
        Ok(reader)
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn cf(&self, name: &str) -> Result<&rocksdb::ColumnFamily> {
        self.db
            .cf_handle(name)
            .with_context(|| format!("the state store in {} lacks column family {name}", self.path.display()))
    }

    /// The raw metadata entry at `key`.
    pub fn meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_cf(self.cf(Cf::Meta.name())?, key)?)
    }

    /// The id of the last committed batch, if any.
    pub fn committed_batch(&self) -> Result<Option<u64>> {
        Ok(self.meta(COMMITTED_BATCH)?.and_then(|raw| Some(u64::from_be_bytes(raw.as_slice().try_into().ok()?))))
    }

    /// The declared variables of `operator`, if the store records them.
    pub fn schema(&self, operator: u16) -> Result<Option<OperatorStateSchema>> {
        let Some(raw) = self.meta(&schema_key(operator))? else { return Ok(None) };
        let schema = serde_json::from_slice(&raw).with_context(|| {
            format!("the state store in {} has an unreadable schema of operator {operator}", self.path.display())
        })?;
        Ok(Some(schema))
    }

    /// Calls `f` with every raw entry of `cf` whose key starts with `prefix`.
    fn scan(&self, cf: &str, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        let mut options = ReadOptions::default();
        if let Some(end) = layout::prefix_end(prefix) {
            options.set_iterate_upper_bound(end);
        }
        for item in self.db.iterator_cf_opt(self.cf(cf)?, options, IteratorMode::From(prefix, Direction::Forward)) {
            let (k, v) = item.with_context(|| format!("cannot read the state store in {}", self.path.display()))?;
            f(&k, &v)?;
        }
        Ok(())
    }

    /// Calls `f` with every state entry whose key starts with `prefix`, packed entries
    /// read as the entries they hold (see [`packed`]) but for those also stored on their
    /// own (the newer copy, visited itself).
    fn scan_state(&self, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        let cf = self.cf(Cf::State.name())?;
        let end = layout::prefix_end(prefix);
        let mut options = ReadOptions::default();
        if let Some(end) = &end {
            options.set_iterate_upper_bound(end.clone());
        }
        let family = self.db.iterator_cf_opt(cf, options, IteratorMode::From(prefix, Direction::Forward));
        let upper = end.as_ref().map_or(Bound::Unbounded, |end| Bound::Excluded(end.clone()));
        let unwritten = self
            .unwritten
            .range((Bound::Included(prefix.to_vec()), upper))
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
            .collect();
        for item in unwritten::merge_changes(family, unwritten) {
            let (k, v) = item.with_context(|| format!("cannot read the state store in {}", self.path.display()))?;
            if !packed::is_packed(&k) {
                f(&k, &v)?;
                continue;
            }
            let entries =
                packed::unpack(&v).with_context(|| format!("in the state store in {}", self.path.display()))?;
            for (key, value) in entries {
                // An entry of its own, where there is one, is the newer.
                let own = match self.unwritten.get(key) {
                    Some(change) => change.is_some(),
                    None => self.db.get_pinned_cf(cf, key)?.is_some(),
                };
                if !own {
                    f(key, value)?;
                }
            }
        }
        Ok(())
    }

    /// Calls `f` with every state entry `filter` selects, in store order (a packed
    /// entry's entries in the order it holds them). Expired
    /// entries not yet evicted are included (flagged), relative to `now`.
    pub fn for_each_entry(
        &self,
        filter: &EntryFilter,
        now: i64,
        mut f: impl FnMut(StateEntry) -> Result<()>,
    ) -> Result<()> {
        let schema = self.schema(filter.operator)?;
        let key_groups = schema.as_ref().map(|schema| schema.key_groups);
        let declared = Declared::of(schema.as_ref());
        let mut visit = |raw_key: &[u8], raw_value: &[u8]| -> Result<bool> {
            match self.entry_of(&declared, filter, raw_key, raw_value, now)? {
                Some(entry) => f(entry).map(|()| true),
                None => Ok(false),
            }
        };
        let operator_prefix = filter.operator.to_be_bytes();
        // With a known key-group count, a key's entries are one contiguous range.
        if let (Some(wanted), Some(groups)) = (&filter.key, key_groups)
            && let Some(encoded) = encode_key(wanted)
        {
            let prefix = layout::key_prefix(filter.operator, key::key_group(&encoded, groups), &encoded);
            let mut found = false;
            self.scan_state(&prefix, |k, v| {
                found |= visit(k, v)?;
                Ok(())
            })?;
            if found {
                return Ok(());
            }
        }
        self.scan_state(&operator_prefix, |k, v| visit(k, v).map(drop))
    }

    /// The change feed of batches `from..=to` (as far as the change log retains them):
    /// every state entry each batch wrote or deleted, in batch then key order.
    pub fn changes(&self, operator: u16, from: u64, to: u64) -> Result<Vec<StateChange>> {
        let declared = Declared::of(self.schema(operator)?.as_ref());
        // Each with its state key: a batch's changes are put in key order at the end.
        let mut changes: Vec<(Vec<u8>, StateChange)> = Vec::new();
        self.scan(CHANGELOG, &[], |raw_key, raw_value| {
            if changelog::batch_of(raw_key).is_some_and(|batch| batch < from || batch > to) {
                return Ok(());
            }
            let (batch, logged) = changelog::decode_entry(raw_key, raw_value, changelog::View::Entries)
                .with_context(|| format!("in the change log of {}", self.path.display()))?;
            for (state_key, value) in logged {
                let (state_key, value) = (&*state_key, value.as_deref());
                let Some((entry_operator, key_group, key_bytes, variable, rest)) = layout::split_state_key(state_key)
                else {
                    bail!("corrupt change-log key {} in {}", hex(state_key), self.path.display());
                };
                if entry_operator != operator {
                    continue;
                }
                let mut entry = decode_entry(
                    decode_key(key_bytes),
                    key_group,
                    variable,
                    declared.kind(variable, rest, value),
                    rest,
                    value.unwrap_or_default(),
                    i64::MIN,
                    declared.window_functions.as_deref(),
                );
                if value.is_none() {
                    entry.value = serde_json::Value::Null;
                    entry.expires_at = serde_json::Value::Null;
                }
                let change = StateChange { batch, change: if value.is_some() { "update" } else { "delete" }, entry };
                changes.push((state_key.to_vec(), change));
            }
            Ok(())
        })?;
        changes.sort_by(|(a_key, a), (b_key, b)| (a.batch, a_key).cmp(&(b.batch, b_key)));
        // A batch that wrote changes ahead of its commit may log a key more than once
        // (in order): its last change is the batch's.
        changes.dedup_by(|later, earlier| {
            let same = later.1.batch == earlier.1.batch && later.0 == earlier.0;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        let changes = changes.into_iter().map(|(_, change)| change).collect();
        Ok(changes)
    }

    /// Decodes one state-CF entry if `filter` selects it.
    fn entry_of(
        &self,
        declared: &Declared,
        filter: &EntryFilter,
        raw_key: &[u8],
        raw_value: &[u8],
        now: i64,
    ) -> Result<Option<StateEntry>> {
        let Some((operator, key_group, key_bytes, variable, rest)) = layout::split_state_key(raw_key) else {
            bail!("corrupt state key {} in {}", hex(raw_key), self.path.display());
        };
        if operator != filter.operator || filter.variable.as_deref().is_some_and(|wanted| wanted != variable) {
            return Ok(None);
        }
        let key_json = decode_key(key_bytes);
        if filter.key.as_ref().is_some_and(|wanted| *wanted != key_json) {
            return Ok(None);
        }
        let kind = declared.kind(variable, rest, Some(raw_value));
        let windows = declared.window_functions.as_deref();
        Ok(Some(decode_entry(key_json, key_group, variable, kind, rest, raw_value, now, windows)))
    }

    /// Calls `f` with every entry `filter` selects as the state was when batch
    /// `batch` committed: the newest snapshot of `checkpoint` at or before it, with the
    /// change log of the later batches applied. `self` is the live store.
    pub fn for_each_entry_as_of(
        &self,
        checkpoint: &CheckpointDir,
        batch: u64,
        filter: &EntryFilter,
        now: i64,
        mut f: impl FnMut(StateEntry) -> Result<()>,
    ) -> Result<()> {
        let committed = self.committed_batch()?;
        if committed == Some(batch) {
            return self.for_each_entry(filter, now, f);
        }
        if committed.is_none_or(|last| batch > last) {
            bail!("batch {batch} is not committed (last committed: {committed:?})");
        }
        let ids = checkpoint.snapshot_ids();
        let Some(base) = ids.iter().copied().filter(|id| *id <= batch).max() else {
            bail!(
                "no snapshot at or before batch {batch} in {} (snapshots: {ids:?}); only batches the checkpoint retains can be read",
                checkpoint.snapshots_dir().display()
            );
        };
        let mut state: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        StateReader::open(&checkpoint.snapshot_of(base))?.scan_state(&[], |k, v| {
            state.insert(k.to_vec(), v.to_vec());
            Ok(())
        })?;
        self.scan(CHANGELOG, &[], |raw_key, raw_value| {
            let (changed_in, logged) = changelog::decode_entry(raw_key, raw_value, changelog::View::Entries)
                .with_context(|| format!("in the change log of {}", self.path.display()))?;
            if changed_in > base && changed_in <= batch {
                for (state_key, value) in logged {
                    match value {
                        Some(value) => state.insert(state_key.into_owned(), value.into_owned()),
                        None => state.remove(&*state_key),
                    };
                }
            }
            Ok(())
        })?;
        let declared = Declared::of(self.schema(filter.operator)?.as_ref());
        for (raw_key, raw_value) in &state {
            if let Some(entry) = self.entry_of(&declared, filter, raw_key, raw_value, now)? {
                f(entry)?;
            }
        }
        Ok(())
    }

    /// Every state entry `filter` selects.
    pub fn entries(&self, filter: &EntryFilter, now: i64) -> Result<Vec<StateEntry>> {
        let mut out = Vec::new();
        self.for_each_entry(filter, now, |entry| {
            out.push(entry);
            Ok(())
        })?;
        Ok(out)
    }

    /// Every timer of `operator` (of `key` only, if given), by key then expiry. Read
    /// from the timer index, which holds every operator's timers (the `timers` family
    /// holds them by key only for an operator that lists them).
    pub fn timers(&self, operator: u16, key: Option<&[serde_json::Value]>) -> Result<Vec<TimerEntry>> {
        // Filtered as they are read (a key's timers are spread over the whole index),
        // then put in the `timers` family's order: key group, key length, key, expiry.
        let mut found = Vec::new();
        self.scan(Cf::TimerIndex.name(), &operator.to_be_bytes(), |raw, value| {
            timer_buckets::visit_entry_timers(raw, value, |expiry, key_group, key_bytes| {
                let key_json = decode_key(key_bytes);
                if key.is_none_or(|wanted| wanted == key_json.as_slice()) {
                    found.push((key_group, key_bytes.to_vec(), expiry, key_json));
                }
            })
            .with_context(|| format!("corrupt timer index entry {} in {}", hex(raw), self.path.display()))?;
            Ok(())
        })?;
        found.sort_unstable_by(|a, b| (a.0, a.1.len(), &a.1, a.2).cmp(&(b.0, b.1.len(), &b.1, b.2)));
        Ok(found
            .into_iter()
            .map(|(key_group, _, expiry, key)| TimerEntry {
                key,
                key_group,
                expiry,
                expires_at: format_micros_iso(expiry),
            })
            .collect())
    }

    /// The store's summary: committed batch, operators, variables and counts.
    pub fn metadata(&self) -> Result<StoreMetadata> {
        #[derive(Default)]
        struct Op {
            keys: BTreeSet<(u16, Vec<u8>)>,
            timers: u64,
            variables: BTreeMap<String, (Option<StateKind>, u64)>,
        }
        let mut operators: BTreeMap<u16, Op> = BTreeMap::new();
        self.scan_state(&[], |raw_key, raw_value| {
            let (operator, key_group, key_bytes, variable, rest) = layout::split_state_key(raw_key)
                .with_context(|| format!("corrupt state key {} in {}", hex(raw_key), self.path.display()))?;
            let op = operators.entry(operator).or_default();
            op.keys.insert((key_group, key_bytes.to_vec()));
            let var = op.variables.entry(variable.to_string()).or_insert((None, 0));
            var.0.get_or_insert_with(|| infer_kind(rest, raw_value));
            var.1 += 1;
            Ok(())
        })?;
        self.scan(Cf::TimerIndex.name(), &[], |raw, value| {
            if let Some(operator) = raw.get(..2).map(|op| u16::from_be_bytes([op[0], op[1]])) {
                let timers = &mut operators.entry(operator).or_default().timers;
                timer_buckets::visit_entry_timers(raw, value, |_, _, _| *timers += 1)
                    .with_context(|| format!("corrupt timer index entry {} in {}", hex(raw), self.path.display()))?;
            }
            Ok(())
        })?;
        let mut out = Vec::new();
        for (operator, op) in operators {
            let schema = self.schema(operator)?;
            let (key_columns, key_groups) = match &schema {
                Some(schema) => (Some(schema.key_columns.clone()), Some(schema.key_groups)),
                None => (None, None),
            };
            let declared = schema.map(|schema| schema.variables).unwrap_or_default();
            let mut variables: Vec<VariableMetadata> = declared
                .iter()
                .map(|decl| VariableMetadata {
                    name: decl.name.clone(),
                    kind: Some(decl.kind),
                    ttl_us: decl.ttl_us,
                    entries: op.variables.get(&decl.name).map_or(0, |(_, n)| *n),
                })
                .collect();
            for (name, (kind, entries)) in op.variables {
                if !declared.iter().any(|decl| decl.name == name) {
                    variables.push(VariableMetadata { name, kind, ttl_us: None, entries });
                }
            }
            out.push(OperatorMetadata {
                operator,
                key_columns,
                key_groups,
                keys: op.keys.len() as u64,
                timers: op.timers,
                variables,
            });
        }
        Ok(StoreMetadata {
            state_store: self.path.display().to_string(),
            committed_batch: self.committed_batch()?,
            operators: out,
        })
    }
}

/// One entry of the change feed.
#[derive(Clone, Debug, Serialize)]
pub struct StateChange {
    /// The batch that made the change.
    pub batch: u64,
    /// `update` or `delete`.
    pub change: &'static str,
    /// The entry (for a delete, without a value).
    #[serde(flatten)]
    pub entry: StateEntry,
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
