//! `eddy:processor/state`'s functions without a variable handle: `read`, a value or map
//! entry of any key of the call, `prefetch`, the entries of some variables for every
//! key of the call, and `apply-changes`, the writes an SDK buffered during
//! a call handed over in one host call (one call per handler call instead of one per
//! change: each host call costs the guest and wasmtime a few hundred nanoseconds).

use std::sync::Arc;

use super::{HostState, trap};
use crate::state::{StateKind, VariableDecl};
use crate::wasm::bindings::eddy::processor::state;

/// The kinds of `apply-changes` records (see `wit/processor.wit`).
mod kind {
    pub const KEY: u8 = 1;
    pub const VALUE_UPDATE: u8 = 2;
    pub const VALUE_CLEAR: u8 = 3;
    pub const MAP_UPDATE: u8 = 4;
    pub const MAP_REMOVE: u8 = 5;
    pub const TIMER_REGISTER: u8 = 6;
    pub const TIMER_DELETE: u8 = 7;
}

/// The most entries and bytes `prefetch` answers with for one key's variable (more are
/// left to `read`: a processor seldom reads every entry of a large map).
const PREFETCH_PER_KEY: (u32, usize) = (64, 16 << 10);

/// How large a `prefetch` answer grows before the remaining keys are left to `read`
/// (and at most a sixteenth of the guest's memory cap, which the answer lands in).
const PREFETCH_MAX_BYTES: usize = 4 << 20;

/// A reader of `apply-changes` records.
struct Records<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Records<'a> {
    fn take(&mut self, len: usize) -> anyhow::Result<&'a [u8]> {
        let end = self.at.checked_add(len).filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            anyhow::bail!(
                "is cut short: it needs {len} more bytes at byte {}, the changes end at {}",
                self.at,
                self.bytes.len()
            );
        };
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self) -> anyhow::Result<u32> {
        let mut raw = [0; 4];
        raw.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(raw))
    }

    fn i64(&mut self) -> anyhow::Result<i64> {
        let mut raw = [0; 8];
        raw.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(raw))
    }

    fn byte_string(&mut self) -> anyhow::Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

/// Variable number `variable` of the declared `variables`, which must be of `kind` (for
/// `what`).
fn declared<'a>(
    variables: &'a [Arc<VariableDecl>],
    variable: u32,
    kind: Option<StateKind>,
    what: &str,
) -> wasmtime::Result<&'a VariableDecl> {
    let Some(decl) = variables.get(variable as usize) else {
        wasmtime::bail!(
            "{what} named state variable {variable}, but the processor declared {} (numbered from 0 in the order of its spec)",
            variables.len()
        );
    };
    if kind.is_some_and(|kind| kind != decl.kind) {
        wasmtime::bail!("{what} used state variable {variable} ('{}', {:?}) as another kind", decl.name, decl.kind);
    }
    Ok(decl)
}

impl HostState {
    /// Makes one record's change, of one of `variables` (the declared ones); `Ok(false)`
    /// past the last record.
    fn apply_record(&mut self, variables: &[Arc<VariableDecl>], records: &mut Records) -> wasmtime::Result<bool> {
        let Some(&record_kind) = records.bytes.get(records.at) else { return Ok(false) };
        records.at += 1;
        let parse = |error: anyhow::Error| trap(anyhow::anyhow!("a record of apply-changes {error}"));
        match record_kind {
            kind::KEY => {
                let index = records.u32().map_err(parse)? as usize;
                if index >= self.scope.keys.len() {
                    wasmtime::bail!(
                        "apply-changes named key {index} of a call over {} keys; the processor's SDK writes the key of each change",
                        self.scope.keys.len()
                    );
                }
                self.scope.current = Some(index);
            }
            _ if self.scope.current.is_none() => {
                wasmtime::bail!(
                    "apply-changes made a change (record kind {record_kind}) with no key current and none named (kind 1)"
                )
            }
            kind::VALUE_UPDATE | kind::VALUE_CLEAR => {
                let decl = declared(variables, records.u32().map_err(parse)?, Some(StateKind::Value), "apply-changes")?;
                if record_kind == kind::VALUE_UPDATE {
                    let value = records.byte_string().map_err(parse)?;
                    self.value_update(decl, value)?;
                } else {
                    self.variable_clear(decl, "value clear")?;
                }
            }
            kind::MAP_UPDATE | kind::MAP_REMOVE => {
                let decl = declared(variables, records.u32().map_err(parse)?, Some(StateKind::Map), "apply-changes")?;
                let user_key = records.byte_string().map_err(parse)?;
                if record_kind == kind::MAP_UPDATE {
                    let value = records.byte_string().map_err(parse)?;
                    self.map_update(decl, user_key, value)?;
                } else {
                    self.map_remove(decl, user_key)?;
                }
            }
            kind::TIMER_REGISTER => self.timer_register(records.i64().map_err(parse)?)?,
            kind::TIMER_DELETE => self.timer_delete(records.i64().map_err(parse)?)?,
            other => wasmtime::bail!(
                "apply-changes holds a record of kind {other} at byte {}, which this contract does not have (1 to 7); \
                 rebuild the module with an eddy-guest SDK of this contract",
                records.at - 1
            ),
        }
        Ok(true)
    }
}

impl state::Host for HostState {
    fn read(&mut self, variable: u32, key: u32, user_key: Vec<u8>) -> wasmtime::Result<Option<Vec<u8>>> {
        let scope = &mut self.scope;
        let decl = declared(&scope.variables, variable, None, "read")?;
        let Some(call_key) = scope.keys.get(key as usize) else {
            wasmtime::bail!(
                "read of state variable '{}' named key {key} of a call over {} keys; state is only reachable while handling a key",
                decl.name,
                scope.keys.len()
            );
        };
        let Some(txn) = scope.txn.as_mut() else {
            wasmtime::bail!("read of state variable '{}' outside a batch", decl.name);
        };
        match decl.kind {
            StateKind::Value if user_key.is_empty() => call_key.scope.value_get(txn, decl).map_err(trap),
            StateKind::Map => call_key.scope.map_get(txn, decl, &user_key).map_err(trap),
            StateKind::Value => {
                wasmtime::bail!("read of value variable '{}' passed a user key; a value has none", decl.name)
            }
            StateKind::List => wasmtime::bail!(
                "read of list variable '{}': read takes value and map variables; use list-state.get",
                decl.name
            ),
        }
    }

    fn prefetch(&mut self, variables: Vec<u32>) -> wasmtime::Result<Vec<u8>> {
        let scope = &self.scope;
        let Some(txn) = scope.txn.as_ref() else {
            wasmtime::bail!("prefetch of state outside a batch");
        };
        let budget = PREFETCH_MAX_BYTES.min(self.limits.memory_cap_bytes / 16);
        // Room for a small entry per key and variable, grown when they hold more.
        let mut out = Vec::with_capacity((variables.len() * scope.keys.len() * 40).min(budget));
        let mut prefix = Vec::new();
        for variable in variables {
            let decl = declared(&scope.variables, variable, None, "prefetch")?;
            if decl.kind == StateKind::List {
                wasmtime::bail!(
                    "prefetch of list variable '{}': prefetch takes value and map variables; use list-state.get",
                    decl.name
                );
            }
            for key in &scope.keys {
                // Past the answer's budget the keys are left to `read`.
                let limits = if out.len() < budget { PREFETCH_PER_KEY } else { (0, 0) };
                key.scope.prefetch_into(txn, decl, limits, &mut prefix, &mut out).map_err(trap)?;
            }
        }
        Ok(out)
    }

    fn apply_changes(&mut self, changes: Vec<u8>) -> wasmtime::Result<()> {
        let selected = self.scope.current;
        // Lent out for the loop (a change borrows its variable and the store data).
        let variables = std::mem::take(&mut self.scope.variables);
        let mut records = Records { bytes: &changes, at: 0 };
        let applied = loop {
            match self.apply_record(&variables, &mut records) {
                Ok(true) => {}
                Ok(false) => break Ok(()),
                Err(error) => break Err(error),
            }
        };
        self.scope.variables = variables;
        // A failing change leaves its key current, for the error to name.
        if applied.is_ok() {
            self.scope.current = selected;
        }
        applied
    }
}
