//! `eddy state metadata|read CHECKPOINT`: reads a query's state from its checkpoint's
//! state store, read-only (so also while the query runs), like Spark's state data
//! source. Output is JSON: one object for `metadata`, JSON lines for `read`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use crate::checkpoint::CheckpointDir;
use crate::inspect::{EntryFilter, StateEntry, StateReader};
use crate::util::now_micros;

/// Reads a query's state store from its checkpoint.
#[derive(Args, Debug, Clone)]
pub struct StateArgs {
    #[command(subcommand)]
    pub command: StateCommand,
}

/// The `eddy state` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum StateCommand {
    /// Prints a summary (JSON): committed batch, operators, variables, key and timer counts.
    Metadata {
        /// The query's checkpoint directory.
        checkpoint: PathBuf,
        /// Indents the JSON.
        #[arg(long)]
        pretty: bool,
    },
    /// Prints state entries (or timers) as JSON lines, with values decoded from CBOR.
    Read(ReadArgs),
}

/// Options of `eddy state read`.
#[derive(Args, Debug, Clone)]
pub struct ReadArgs {
    /// The query's checkpoint directory.
    pub checkpoint: PathBuf,
    /// The stage whose state to read: its name in the pipeline, or its operator id
    /// (its position in the chain).
    #[arg(long, value_name = "NAME|N", default_value = "0")]
    pub operator: String,
    /// Only this state variable.
    #[arg(long = "var", value_name = "NAME", conflicts_with = "timers")]
    pub var: Option<String>,
    /// Only this grouping key, as a JSON array of its values, e.g. '["alice"]'.
    #[arg(long, value_name = "JSON")]
    pub key: Option<String>,
    /// Prints the change feed of batches FROM..TO (inclusive; `N` alone for one batch)
    /// from the change log: batch, key, variable, `update` or `delete`, value.
    #[arg(long, value_name = "FROM..TO", conflicts_with = "timers")]
    pub changes: Option<String>,
    /// Reads the state as it was when this batch committed (from a snapshot and the
    /// change log; only batches the checkpoint retains).
    #[arg(long, value_name = "N", conflicts_with_all = ["timers", "changes"])]
    pub batch: Option<u64>,
    /// Prints the timers instead of the state variables.
    #[arg(long)]
    pub timers: bool,
}

/// The operator id of `stage`: a number, or a stage name from the checkpoint's state
/// schema record.
fn resolve_operator(checkpoint: &std::path::Path, stage: &str) -> Result<u16> {
    if let Ok(id) = stage.parse::<u16>() {
        return Ok(id);
    }
    let path = crate::checkpoint::CheckpointDir::new(checkpoint).schema_file();
    let file: serde_json::Value =
        std::fs::read(&path).ok().and_then(|raw| serde_json::from_slice(&raw).ok()).unwrap_or(serde_json::Value::Null);
    let operators = file.get("operators").and_then(|o| o.as_object()).cloned().unwrap_or_default();
    let mut names = Vec::new();
    for (id, schema) in &operators {
        let name = schema.get("stage").and_then(|n| n.as_str()).unwrap_or_default();
        if name == stage {
            return id.parse().map_err(|_| anyhow::anyhow!("{} names operator '{id}', not a number", path.display()));
        }
        names.push(format!("{name} ({id})"));
    }
    anyhow::bail!(
        "the checkpoint has no stage named '{stage}'; its stateful stages are: {}",
        if names.is_empty() { "none recorded yet".to_string() } else { names.join(", ") }
    )
}

/// Runs `eddy state`, printing to stdout. A closed stdout (e.g. `| head`) ends it quietly.
pub fn run(args: &StateArgs) -> Result<()> {
    super::print_to_stdout(|out| print_state(args, out))
}

/// Prints what `args` asks for to `out`.
pub fn print_state(args: &StateArgs, out: &mut impl Write) -> Result<()> {
    match &args.command {
        StateCommand::Metadata { checkpoint, pretty } => {
            let metadata = StateReader::open_checkpoint(checkpoint)?.metadata()?;
            let text =
                if *pretty { serde_json::to_string_pretty(&metadata)? } else { serde_json::to_string(&metadata)? };
            writeln!(out, "{text}")?;
        }
        StateCommand::Read(read) => {
            let key = read.key.as_deref().map(parse_key).transpose()?;
            let reader = StateReader::open_checkpoint(&read.checkpoint)?;
            let operator = resolve_operator(&read.checkpoint, &read.operator)?;
            if let Some(range) = &read.changes {
                let (from, to) = parse_range(range)?;
                for change in reader.changes(operator, from, to)? {
                    let matches_var = read.var.as_ref().is_none_or(|var| *var == change.entry.var);
                    if matches_var && key.as_ref().is_none_or(|key| *key == change.entry.key) {
                        writeln!(out, "{}", serde_json::to_string(&change)?)?;
                    }
                }
            } else if read.timers {
                for timer in reader.timers(operator, key.as_deref())? {
                    writeln!(out, "{}", serde_json::to_string(&timer)?)?;
                }
            } else {
                let filter = EntryFilter { operator, variable: read.var.clone(), key };
                let print = |entry: StateEntry| -> Result<()> {
                    writeln!(out, "{}", serde_json::to_string(&entry)?)?;
                    Ok(())
                };
                match read.batch {
                    Some(batch) => reader.for_each_entry_as_of(
                        &CheckpointDir::new(&read.checkpoint),
                        batch,
                        &filter,
                        now_micros(),
                        print,
                    )?,
                    None => reader.for_each_entry(&filter, now_micros(), print)?,
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// `--changes`: `FROM..TO` or a single batch id.
fn parse_range(text: &str) -> Result<(u64, u64)> {
    let bad = || anyhow::anyhow!("--changes {text:?} is not a batch range: write FROM..TO, e.g. 3..7, or one batch id");
    match text.split_once("..") {
        Some((from, to)) => Ok((from.trim().parse().map_err(|_| bad())?, to.trim().parse().map_err(|_| bad())?)),
        None => {
            let batch = text.trim().parse().map_err(|_| bad())?;
            Ok((batch, batch))
        }
    }
}

/// `--key`: a JSON array of the key's values (a single value is taken as a one-part key).
fn parse_key(text: &str) -> Result<Vec<serde_json::Value>> {
    let value: serde_json::Value = serde_json::from_str(text).with_context(|| {
        format!("--key {text:?} is not JSON: give the key's values as a JSON array, e.g. '[\"alice\"]'")
    })?;
    match value {
        serde_json::Value::Array(parts) => Ok(parts),
        serde_json::Value::Object(_) => {
            bail!("--key {text:?} is an object: give the key's values as a JSON array, e.g. '[\"alice\"]'")
        }
        single => Ok(vec![single]),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::contract::Scalar;
    use crate::state::{KeyScope, StateKind, StateStore, VariableDecl, key};

    #[derive(Parser)]
    struct TestCli {
        #[command(flatten)]
        args: StateArgs,
    }

    fn parse(words: &[&str]) -> Result<StateArgs> {
        Ok(TestCli::try_parse_from(std::iter::once("state").chain(words.iter().copied()))?.args)
    }

    fn printed(words: &[&str]) -> Result<Vec<serde_json::Value>> {
        let mut out = Vec::new();
        print_state(&parse(words)?, &mut out)?;
        String::from_utf8(out)?.lines().map(|line| Ok(serde_json::from_str(line)?)).collect()
    }

    fn cbor<T: serde::Serialize>(value: &T) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(value, &mut out).expect("cbor");
        out
    }

    /// A checkpoint whose store stays open (like a running query) while the CLI reads it.
    fn checkpoint() -> Result<(tempfile::TempDir, StateStore)> {
        let dir = tempfile::tempdir()?;
        let store = StateStore::open(&CheckpointDir::new(dir.path()).store_dir())?;
        let mut txn = store.begin();
        let totals = VariableDecl { name: "totals".into(), kind: StateKind::Value, ttl_us: None };
        let seen = VariableDecl { name: "seen".into(), kind: StateKind::Map, ttl_us: None };
        for (user, count) in [("alice", 4), ("bob", 1)] {
            let encoded = key::encode(&[Scalar::Utf8(user.into())]);
            let scope = KeyScope::new(0, key::key_group(&encoded, 8), &encoded, 0);
            scope.value_update(&mut txn, &totals, &cbor(&serde_json::json!({ "count": count })));
            scope.map_update(&mut txn, &seen, &cbor(&"page"), &cbor(&true));
            scope.timer_register(&mut txn, 60_000_000);
        }
        store.commit(txn, 1)?;
        Ok((dir, store))
    }

    #[test]
    fn prints_metadata() -> Result<()> {
        let (dir, _store) = checkpoint()?;
        let meta = printed(&["metadata", &dir.path().to_string_lossy()])?;
        assert_eq!(meta.len(), 1);
        assert_eq!(meta[0]["committedBatch"], 1);
        let op = &meta[0]["operators"][0];
        assert_eq!((op["operator"].as_u64(), op["keys"].as_u64(), op["timers"].as_u64()), (Some(0), Some(2), Some(2)));
        assert_eq!(op["variables"].as_array().map(Vec::len), Some(2));
        Ok(())
    }

    #[test]
    fn reads_entries_filtered_by_var_and_key() -> Result<()> {
        let (dir, _store) = checkpoint()?;
        let cp = dir.path().to_string_lossy().into_owned();
        assert_eq!(printed(&["read", &cp])?.len(), 4);
        let lines = printed(&["read", &cp, "--var", "totals", "--key", r#"["alice"]"#])?;
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["key"], serde_json::json!(["alice"]));
        assert_eq!(lines[0]["kind"], "value");
        assert_eq!(lines[0]["value"], serde_json::json!({"count": 4}));
        assert_eq!(lines[0]["expiresAt"], serde_json::Value::Null);
        let map = printed(&["read", &cp, "--var", "seen", "--key", "\"bob\""])?;
        assert_eq!(
            (map[0]["kind"].as_str(), map[0]["mapKey"].as_str(), map[0]["value"].as_bool()),
            (Some("map"), Some("page"), Some(true))
        );
        assert!(printed(&["read", &cp, "--operator", "1"])?.is_empty());
        Ok(())
    }

    #[test]
    fn reads_timers() -> Result<()> {
        let (dir, _store) = checkpoint()?;
        let cp = dir.path().to_string_lossy().into_owned();
        let timers = printed(&["read", &cp, "--timers", "--key", r#"["bob"]"#])?;
        assert_eq!(timers.len(), 1);
        assert_eq!(timers[0]["expiry"], 60_000_000);
        assert_eq!(timers[0]["expiresAt"], "1970-01-01T00:01:00.000Z");
        assert!(timers[0]["keyGroup"].is_u64());
        Ok(())
    }

    #[test]
    fn errors_say_what_to_do() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let cp = dir.path().to_string_lossy().into_owned();
        let error = print_state(&parse(&["read", &cp])?, &mut Vec::new()).expect_err("no store");
        assert!(error.to_string().contains("has the query run with this checkpoint?"), "{error}");
        let error = print_state(&parse(&["read", &cp, "--key", "alice"])?, &mut Vec::new()).expect_err("bad key");
        assert!(error.to_string().contains("JSON array"), "{error}");
        assert!(parse(&["read", &cp, "--timers", "--var", "x"]).is_err());
        assert!(parse(&["read"]).is_err());
        Ok(())
    }
}
