//! What a checkpoint's state was written by, and whether a restart may use it.
//!
//! Each operator's state schema — key columns, key-group count, variables with kind
//! and TTL, and the module's hash — is kept in the store (`schema/<operator>`, JSON).
//! A restart must agree on everything but the module (a new module version with the
//! same state keeps the state), may add variables and may delete the ones it names
//! (Spark's `deleteIfExists`); anything else is refused with what changed and the two
//! ways forward. A new or changed schema is recorded with the
//! next committed batch, never before. A readable copy of every operator's schema is
//! kept in `state/_schema` (the store's copy is the one checked).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::store::{Cf, StateStore};
use super::variables::VariableDecl;
use crate::checkpoint::CheckpointDir;

/// The state schema of one operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorStateSchema {
    /// The grouping columns.
    pub key_columns: Vec<String>,
    /// How many key groups keys hash into.
    pub key_groups: u16,
    /// The declared state variables.
    pub variables: Vec<VariableDecl>,
    /// SHA-256 of the module that declared them (`builtin:…` for a built-in stage).
    pub module_sha256: String,
    /// The stage's name in the pipeline (`eddy state read --operator NAME`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stage: String,
    /// The window stage's aggregate functions in order (`count`, `sum`, `min`, `max`,
    /// `avg`): its values hold their numbers by position, which the reader names by these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window_aggregates: Vec<String>,
    /// Whether the keys' timers are kept by key (the `timers` family) as well as in the
    /// timer index: for a processor that lists timers, and for every operator of a
    /// store written before this was recorded. A restart converts them when it changes.
    #[serde(default = "kept", skip_serializing_if = "is_kept")]
    pub timers_by_key: bool,
    /// Whether the timer index holds the timers packed by bucket (see
    /// [`timer_buckets`](super::timer_buckets)): not in a store written before this was
    /// recorded, which a restart packs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timers_packed: bool,
}

fn kept() -> bool {
    true
}

fn is_kept(timers_by_key: &bool) -> bool {
    *timers_by_key
}

/// The meta key of `operator`'s state schema.
pub fn schema_key(operator: u16) -> Vec<u8> {
    format!("schema/{operator}").into_bytes()
}

/// The state schema stored for `operator`, if any.
pub fn stored_schema(store: &StateStore, operator: u16) -> Result<Option<OperatorStateSchema>> {
    match store.read(Cf::Meta, &schema_key(operator))? {
        Some(raw) => Ok(Some(serde_json::from_slice(&raw)?)),
        None => Ok(None),
    }
}

/// What [`check`] found a restart must do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SchemaCheck {
    /// `current` is new or a compatible change: record it with the next batch's commit.
    pub record: bool,
    /// Stored variables the new version deletes: delete their data with the next batch.
    pub delete: Vec<String>,
    /// The stored timers are kept the other way than `current` keeps them (by key or in
    /// the timer index only, packed by bucket or one entry each): convert them with the
    /// next batch.
    pub convert_timers: bool,
}

/// Checks `current` (whose processor deletes the variables `deleted`) against the schema
/// the store holds for `operator`: an error naming every incompatible change and the
/// two ways forward, or what to do. A new or compatibly changed schema is recorded —
/// and deleted variables' data is deleted — with the next batch's commit
/// ([`schema_entry`]), so that a new module whose first batch fails leaves the stored
/// state as it was and the previous module can still take over.
pub fn check(
    store: &StateStore,
    operator: u16,
    current: &OperatorStateSchema,
    deleted: &[String],
    checkpoint: &CheckpointDir,
) -> Result<SchemaCheck> {
    let stored = stored_schema(store, operator)?;
    let mut delete = Vec::new();
    let mut convert_timers = false;
    if let Some(stored) = &stored {
        convert_timers = stored.timers_by_key != current.timers_by_key || stored.timers_packed != current.timers_packed;
        let changes = incompatible_changes(stored, current, deleted);
        if !changes.is_empty() {
            bail!(
                "the checkpoint {} holds state that this pipeline cannot use: {}. Either revert that change, \
                 or start from a new checkpoint (another --checkpoint directory) to begin with empty state",
                checkpoint.root().display(),
                changes.join("; ")
            );
        }
        if stored.module_sha256 != current.module_sha256 {
            crate::log::info(&format!("operator {operator}: a new module version takes over the existing state"));
        }
        delete = stored
            .variables
            .iter()
            .filter(|before| deleted.contains(&before.name) && !current.variables.iter().any(|v| v.name == before.name))
            .map(|before| before.name.clone())
            .collect();
    }
    Ok(SchemaCheck { record: stored.as_ref() != Some(current), delete, convert_timers })
}

/// The meta entry that records `schema` as `operator`'s, to be written in a batch's commit.
pub fn schema_entry(operator: u16, schema: &OperatorStateSchema) -> Result<(Vec<u8>, Vec<u8>)> {
    Ok((schema_key(operator), serde_json::to_vec(schema)?))
}

/// Version of the `state/_schema` file's format.
const SCHEMA_FILE_VERSION: u32 = 1;

/// Records `schema` for `operator` in the checkpoint's `state/_schema` (JSON, keeping
/// the other operators' entries), once the store holds it.
pub fn write_schema_file(checkpoint: &CheckpointDir, operator: u16, schema: &OperatorStateSchema) -> Result<()> {
    let path = checkpoint.schema_file();
    let mut operators: BTreeMap<String, OperatorStateSchema> = std::fs::read(&path)
        .ok()
        .and_then(|raw| serde_json::from_slice::<serde_json::Value>(&raw).ok())
        .and_then(|file| serde_json::from_value(file.get("operators")?.clone()).ok())
        .unwrap_or_default();
    if operators.get(&operator.to_string()) == Some(schema) {
        return Ok(());
    }
    operators.insert(operator.to_string(), schema.clone());
    let file = serde_json::json!({ "version": SCHEMA_FILE_VERSION, "operators": operators });
    crate::util::fs::write_atomic(&path, format!("{file:#}\n").as_bytes())
}

/// Everything that changed in a way the stored state cannot follow.
fn incompatible_changes(
    stored: &OperatorStateSchema,
    current: &OperatorStateSchema,
    deleted: &[String],
) -> Vec<String> {
    let mut changes = Vec::new();
    if !stored.stage.is_empty() && !current.stage.is_empty() && stored.stage != current.stage {
        changes.push(format!(
            "its state belongs to stage '{}', but stage '{}' is in that place now (stages were added, removed or reordered)",
            stored.stage, current.stage
        ));
    }
    let builtin = |schema: &OperatorStateSchema| schema.module_sha256.starts_with("builtin:");
    if (builtin(stored) || builtin(current)) && stored.module_sha256 != current.module_sha256 {
        changes.push(format!(
            "stage '{}' changed what its state means (from {} to {})",
            current.stage, stored.module_sha256, current.module_sha256
        ));
    }
    if stored.key_columns != current.key_columns {
        changes.push(format!("the key columns changed from {:?} to {:?}", stored.key_columns, current.key_columns));
    }
    if stored.key_groups != current.key_groups {
        changes.push(format!("the key-group count changed from {} to {}", stored.key_groups, current.key_groups));
    }
    for before in &stored.variables {
        match current.variables.iter().find(|now| now.name == before.name) {
            None if deleted.contains(&before.name) => {}
            None => changes.push(format!(
                "state variable '{}' ({}) is no longer declared (to drop its data, delete it in init, like Spark's \
                 deleteIfExists: ctx.delete_if_exists(\"{}\"))",
                before.name,
                kind(before),
                before.name
            )),
            Some(now) if now.kind != before.kind => {
                changes.push(format!(
                    "state variable '{}' changed kind from {} to {}",
                    before.name,
                    kind(before),
                    kind(now)
                ));
            }
            Some(now) if now.ttl_us != before.ttl_us => changes.push(format!(
                "state variable '{}' changed TTL from {} to {}",
                before.name,
                describe_ttl(before.ttl_us),
                describe_ttl(now.ttl_us)
            )),
            Some(_) => {}
        }
    }
    changes
}

fn kind(variable: &VariableDecl) -> String {
    format!("{:?}", variable.kind).to_lowercase()
}

fn describe_ttl(ttl_us: Option<u64>) -> String {
    ttl_us.map_or_else(|| "none".to_string(), |us| format!("{} ms", us / 1000))
}
