//! Reading a query's state store from outside the query (`eddy state`), like Spark's
//! state data source: read-only, so it also works while the query runs.
//!
//! The store is opened with RocksDB's read-only mode, which takes no lock and sees
//! every batch committed when it opens (a run holding the store open is fine). If
//! read-only opening fails, it falls back to a secondary instance (catching up with
//! the primary). Values are shown decoded from CBOR (the SDK's encoding) into JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rocksdb::{DB, Direction, IteratorMode, Options, ReadOptions};
use serde::Serialize;

use super::entry_json::{decode_entry, decode_key, encode_key, hex, infer_kind};
use super::layout;
use super::store::CF_NAMES;
use super::variables::{StateKind, VariableDecl};
use crate::operator::key;
use crate::progress::format_micros_iso;

const CF_STATE: &str = "state";
const CF_TIMERS: &str = "timers";
const CF_META: &str = "meta";

/// Meta key of the committed batch id (u64 big-endian).
pub const META_COMMITTED_BATCH: &[u8] = super::store::COMMITTED_BATCH;
/// Meta key of the key-group count (u16 big-endian, or its decimal text).
pub const META_KEY_GROUPS: &[u8] = b"key-groups";

/// Meta key of an operator's state schema (written at query start, see
/// `compatibility.rs`): JSON `{"key_columns","key_groups","variables":[{"name","kind","ttl_us"}],..}`.
pub fn meta_schema_key(operator: u16) -> Vec<u8> {
    super::compatibility::schema_key(operator)
}

/// The part of the operator schema stored under [`meta_schema_key`] that reading
/// needs (lenient: older or newer schemas with fewer or more fields still read).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct OperatorSchema {
    /// The grouping columns.
    #[serde(default)]
    pub key_columns: Vec<String>,
    /// How many key groups keys hash into.
    #[serde(default)]
    pub key_groups: Option<u16>,
    /// The state variables the processor declared.
    #[serde(default)]
    pub variables: Vec<VariableDecl>,
}

/// A read-only view of a state store.
pub struct StateReader {
    db: DB,
    path: PathBuf,
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

/// One state entry, decoded: one JSON line of `eddy state read`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateEntry {
    /// The grouping key's values.
    pub key: Vec<serde_json::Value>,
    /// The key group of the key.
    pub key_group: u16,
    /// The variable's name.
    pub var: String,
    /// value, list or map.
    pub kind: StateKind,
    /// The map entry's user key (maps only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map_key: Option<serde_json::Value>,
    /// The value (for a list: the array of its elements).
    pub value: serde_json::Value,
    /// When the entry expires (ISO time), null for never; for a list with TTL, one per element.
    pub expires_at: serde_json::Value,
    /// Whether the entry (for a list: any element) has expired but is not yet evicted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expired: bool,
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
    /// The key-group count, when the store records it outside the operator schemas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_groups: Option<u16>,
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
        let store = super::paths::store_dir(checkpoint);
        if !store.join("CURRENT").exists() && checkpoint.join("CURRENT").exists() {
            return Self::open(checkpoint);
        }
        Self::open(&store)
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
            Ok(db) => Ok(Self { db, path: path.to_path_buf(), _secondary: None }),
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
                Ok(Self { db, path: path.to_path_buf(), _secondary: Some(secondary) })
            }
        }
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
        Ok(self.db.get_cf(self.cf(CF_META)?, key)?)
    }

    /// The id of the last committed batch, if any.
    pub fn committed_batch(&self) -> Result<Option<u64>> {
        Ok(self.meta(META_COMMITTED_BATCH)?.and_then(|raw| Some(u64::from_be_bytes(raw.as_slice().try_into().ok()?))))
    }

    /// The key-group count, if the store records it (u16 big-endian or decimal text).
    pub fn key_groups(&self) -> Result<Option<u16>> {
        Ok(self.meta(META_KEY_GROUPS)?.and_then(|raw| match <[u8; 2]>::try_from(raw.as_slice()) {
            Ok(bytes) => Some(u16::from_be_bytes(bytes)),
            Err(_) => std::str::from_utf8(&raw).ok()?.trim().parse().ok(),
        }))
    }

    /// The declared variables of `operator`, if the store records them.
    pub fn schema(&self, operator: u16) -> Result<Option<OperatorSchema>> {
        let Some(raw) = self.meta(&meta_schema_key(operator))? else { return Ok(None) };
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

    /// Calls `f` with every state entry `filter` selects, in store order. Expired
    /// entries not yet evicted are included (flagged), relative to `now`.
    pub fn for_each_entry(
        &self,
        filter: &EntryFilter,
        now: i64,
        mut f: impl FnMut(StateEntry) -> Result<()>,
    ) -> Result<()> {
        let schema = self.schema(filter.operator)?.unwrap_or_default();
        let key_groups = match schema.key_groups {
            Some(groups) => Some(groups),
            None => self.key_groups()?,
        };
        let kinds: BTreeMap<String, StateKind> =
            schema.variables.into_iter().map(|decl| (decl.name, decl.kind)).collect();
        let mut visit = |raw_key: &[u8], raw_value: &[u8]| -> Result<bool> {
            match self.entry_of(&kinds, filter, raw_key, raw_value, now)? {
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
            self.scan(CF_STATE, &prefix, |k, v| {
                found |= visit(k, v)?;
                Ok(())
            })?;
            if found {
                return Ok(());
            }
        }
        self.scan(CF_STATE, &operator_prefix, |k, v| visit(k, v).map(drop))
    }

    /// The change feed of batches `from..=to` (as far as the change log retains them):
    /// every state entry each batch wrote or deleted, in batch then key order.
    pub fn changes(&self, operator: u16, from: u64, to: u64) -> Result<Vec<StateChange>> {
        let schema = self.schema(operator)?.unwrap_or_default();
        let kinds: BTreeMap<String, StateKind> =
            schema.variables.into_iter().map(|decl| (decl.name, decl.kind)).collect();
        let mut changes = Vec::new();
        self.scan(super::store::CHANGELOG, &[], |raw_key, raw_value| {
            let (Some(batch), Some(state_key)) = (raw_key.get(..8), raw_key.get(8..)) else { return Ok(()) };
            let batch = u64::from_be_bytes(batch.try_into().unwrap_or_default());
            let Some((entry_operator, key_group, key_bytes, variable, rest)) = layout::split_state_key(state_key)
            else {
                bail!("corrupt change-log key {} in {}", hex(raw_key), self.path.display());
            };
            if batch < from || batch > to || entry_operator != operator {
                return Ok(());
            }
            let deleted = raw_value.first() == Some(&1);
            let value = raw_value.get(1..).unwrap_or_default();
            let kind = kinds
                .get(variable)
                .copied()
                .unwrap_or_else(|| if deleted { StateKind::Value } else { infer_kind(rest, value) });
            let mut entry = decode_entry(decode_key(key_bytes), key_group, variable, kind, rest, value, i64::MIN);
            if deleted {
                entry.value = serde_json::Value::Null;
                entry.expires_at = serde_json::Value::Null;
            }
            changes.push(StateChange { batch, change: if deleted { "delete" } else { "update" }, entry });
            Ok(())
        })?;
        Ok(changes)
    }

    /// Decodes one state-CF entry if `filter` selects it.
    fn entry_of(
        &self,
        kinds: &BTreeMap<String, StateKind>,
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
        let kind = kinds.get(variable).copied().unwrap_or_else(|| infer_kind(rest, raw_value));
        Ok(Some(decode_entry(key_json, key_group, variable, kind, rest, raw_value, now)))
    }

    /// Calls `f` with every entry `filter` selects as the state was when batch
    /// `batch` committed: the newest snapshot of `checkpoint` at or before it, with the
    /// change log of the later batches applied. `self` is the live store.
    pub fn for_each_entry_as_of(
        &self,
        checkpoint: &Path,
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
        let snapshots = super::paths::snapshots_dir(checkpoint);
        let mut ids: Vec<u64> = std::fs::read_dir(&snapshots)
            .map(|entries| entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
            .unwrap_or_default();
        ids.sort_unstable();
        let Some(base) = ids.iter().copied().filter(|id| *id <= batch).max() else {
            bail!(
                "no snapshot at or before batch {batch} in {} (snapshots: {ids:?}); only batches the checkpoint retains can be read",
                snapshots.display()
            );
        };
        let mut state: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        StateReader::open(&snapshots.join(base.to_string()))?.scan(CF_STATE, &[], |k, v| {
            state.insert(k.to_vec(), v.to_vec());
            Ok(())
        })?;
        self.scan(super::store::CHANGELOG, &[], |raw_key, raw_value| {
            let changed_in = raw_key.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
            if changed_in.is_some_and(|changed| changed > base && changed <= batch) {
                let state_key = raw_key[8..].to_vec();
                match raw_value.split_first() {
                    Some((0, value)) => state.insert(state_key, value.to_vec()),
                    _ => state.remove(&state_key),
                };
            }
            Ok(())
        })?;
        let schema = self.schema(filter.operator)?.unwrap_or_default();
        let kinds: BTreeMap<String, StateKind> =
            schema.variables.into_iter().map(|decl| (decl.name, decl.kind)).collect();
        for (raw_key, raw_value) in &state {
            if let Some(entry) = self.entry_of(&kinds, filter, raw_key, raw_value, now)? {
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

    /// Every timer of `operator` (of `key` only, if given), by key then expiry.
    pub fn timers(&self, operator: u16, key: Option<&[serde_json::Value]>) -> Result<Vec<TimerEntry>> {
        let mut out = Vec::new();
        self.scan(CF_TIMERS, &operator.to_be_bytes(), |raw, _| {
            let (_, key_group, key_bytes, rest) = layout::split_key_prefix(raw)
                .with_context(|| format!("corrupt timer key {} in {}", hex(raw), self.path.display()))?;
            let expiry = layout::from_sortable_i64(rest)
                .with_context(|| format!("corrupt timer key {} in {}", hex(raw), self.path.display()))?;
            let key_json = decode_key(key_bytes);
            if key.is_none_or(|wanted| wanted == key_json.as_slice()) {
                out.push(TimerEntry { key: key_json, key_group, expiry, expires_at: format_micros_iso(expiry) });
            }
            Ok(())
        })?;
        Ok(out)
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
        self.scan(CF_STATE, &[], |raw_key, raw_value| {
            let (operator, key_group, key_bytes, variable, rest) = layout::split_state_key(raw_key)
                .with_context(|| format!("corrupt state key {} in {}", hex(raw_key), self.path.display()))?;
            let op = operators.entry(operator).or_default();
            op.keys.insert((key_group, key_bytes.to_vec()));
            let var = op.variables.entry(variable.to_string()).or_insert((None, 0));
            var.0.get_or_insert_with(|| infer_kind(rest, raw_value));
            var.1 += 1;
            Ok(())
        })?;
        self.scan(CF_TIMERS, &[], |raw, _| {
            if let Some((operator, ..)) = layout::split_key_prefix(raw) {
                operators.entry(operator).or_default().timers += 1;
            }
            Ok(())
        })?;
        let mut out = Vec::new();
        for (operator, op) in operators {
            let schema = self.schema(operator)?;
            let (key_columns, key_groups) = match &schema {
                Some(schema) => (Some(schema.key_columns.clone()), schema.key_groups),
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
            key_groups: self.key_groups()?,
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
#[path = "reader_tests.rs"]
mod tests;
