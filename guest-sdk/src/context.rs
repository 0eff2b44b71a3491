//! What `init` receives and declares.

use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::modes::{OutputMode, TimeMode};
use crate::schema::Schema;
use crate::state::{ListState, MapState, Ttl, ValueState};
use crate::store::Store;
use crate::timers::Timers;

/// The kind of a state variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StateKind {
    Value,
    List,
    Map,
}

/// A declared state variable.
#[derive(Clone, Debug)]
pub(crate) struct StateDecl {
    pub(crate) name: String,
    pub(crate) kind: StateKind,
    pub(crate) ttl_micros: Option<u64>,
}

/// Everything `init` declared.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub(crate) state: Vec<StateDecl>,
    pub(crate) output_schema: Rc<Schema>,
    pub(crate) time_mode: TimeMode,
    pub(crate) accepts_late_rows: bool,
    pub(crate) initial_state_schema: Option<Rc<Schema>>,
    pub(crate) deleted_state: Vec<String>,
}

/// Which query and which run of it the processor is part of (Spark's `QueryInfo`),
/// from [`InitContext::query_info`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryInfo {
    /// The query's id: kept in the checkpoint, the same across restarts.
    pub id: String,
    /// This run's id: new each time the query starts.
    pub run_id: String,
}

/// What [`StatefulProcessor::init`](crate::StatefulProcessor::init) receives: the
/// query's schemas, output mode and config, and where the processor declares its
/// state variables, output schema and time mode.
pub struct InitContext {
    input_schema: Rc<Schema>,
    key_schema: Rc<Schema>,
    output_mode: OutputMode,
    config: String,
    event_time_column: Option<String>,
    query: QueryInfo,
    pub(crate) store: Rc<Store>,
    spec: Spec,
}

impl InitContext {
    pub(crate) fn new(
        input_schema: Rc<Schema>,
        key_schema: Rc<Schema>,
        output_mode: OutputMode,
        config: String,
        query: QueryInfo,
        store: Rc<Store>,
    ) -> Self {
        let spec = Spec {
            state: Vec::new(),
            output_schema: Rc::new(Schema::default()),
            time_mode: TimeMode::None,
            accepts_late_rows: false,
            initial_state_schema: None,
            deleted_state: Vec::new(),
        };
        InitContext { input_schema, key_schema, output_mode, config, event_time_column: None, query, store, spec }
    }

    pub(crate) fn input_schema_rc(&self) -> Rc<Schema> {
        self.input_schema.clone()
    }

    pub(crate) fn into_spec(self) -> Spec {
        self.spec
    }

    /// The query and run the processor is part of (Spark's `getQueryInfo`); the batch
    /// id is in each handler's [`TimerValues`](crate::TimerValues).
    pub fn query_info(&self) -> &QueryInfo {
        &self.query
    }

    /// The schema of the rows handed to `handle_input_rows`.
    pub fn input_schema(&self) -> &Schema {
        &self.input_schema
    }

    /// The schema of the key (the grouping columns, in order).
    pub fn key_schema(&self) -> &Schema {
        &self.key_schema
    }

    /// The query's output mode.
    pub fn output_mode(&self) -> OutputMode {
        self.output_mode
    }

    /// The operator's config table from the pipeline spec, as JSON text (`{}` when
    /// the spec has none).
    pub fn config_json(&self) -> &str {
        &self.config
    }

    /// The input's event-time column, when the query has a watermark.
    pub fn event_time_column(&self) -> Option<&str> {
        self.event_time_column.as_deref()
    }

    pub(crate) fn set_event_time_column(&mut self, column: Option<String>) {
        self.event_time_column = column;
    }

    /// Asks the host to hand over late rows (event time at or before the watermark)
    /// instead of dropping them, so the processor can apply its own rule — e.g. a
    /// window only drops a row once the watermark has passed the window's end.
    pub fn set_accepts_late_rows(&mut self, accepts: bool) {
        self.spec.accepts_late_rows = accepts;
    }

    /// Deletes the data of state variable `name`, which an earlier version of this
    /// processor declared and this one no longer does (Spark's `deleteIfExists`): the
    /// host deletes it with the next batch, instead of refusing the checkpoint. A name
    /// the checkpoint does not hold is ignored; do not also declare it.
    pub fn delete_if_exists(&mut self, name: &str) {
        if !self.spec.deleted_state.iter().any(|deleted| deleted == name) {
            self.spec.deleted_state.push(name.to_string());
        }
    }

    /// The config deserialized into `T`; use `#[serde(default)]` for optional fields.
    pub fn config<T: DeserializeOwned>(&self) -> Result<T> {
        let text = if self.config.trim().is_empty() { "{}" } else { &self.config };
        serde_json::from_str(text).map_err(|e| {
            Error::msg(format!(
                "invalid processor config {text}: {e}; fix the operator's `config` table in the \
                 pipeline spec"
            ))
        })
    }

    /// Adds a variable to the spec; its place there (what the host numbers it by).
    fn declare(&mut self, name: &str, kind: StateKind, ttl: Ttl) -> Result<u32> {
        if name.is_empty() {
            return Err(Error::msg("a state variable needs a non-empty name"));
        }
        if self.spec.state.iter().any(|decl| decl.name == name) {
            return Err(Error::msg(format!(
                "state variable `{name}` is declared twice; give each variable its own name"
            )));
        }
        let ttl_micros = ttl.to_micros(name)?;
        self.spec.state.push(StateDecl { name: name.to_string(), kind, ttl_micros });
        Ok(self.spec.state.len() as u32 - 1)
    }

    /// Declares a value state variable (one `T` per key). Keep the returned handle
    /// in the processor; it opens the host's variable on first use.
    pub fn value_state<T: Serialize + DeserializeOwned>(
        &mut self,
        name: &str,
        ttl: impl Into<Ttl>,
    ) -> Result<ValueState<T>> {
        let variable = self.declare(name, StateKind::Value, ttl.into())?;
        Ok(ValueState::new(name, variable, self.store.clone()))
    }

    /// Declares a list state variable (an ordered list of `T` per key).
    pub fn list_state<T: Serialize + DeserializeOwned>(
        &mut self,
        name: &str,
        ttl: impl Into<Ttl>,
    ) -> Result<ListState<T>> {
        self.declare(name, StateKind::List, ttl.into())?;
        Ok(ListState::new(name, self.store.clone()))
    }

    /// Declares a map state variable (a map of `K` to `V` per key).
    pub fn map_state<K, V>(&mut self, name: &str, ttl: impl Into<Ttl>) -> Result<MapState<K, V>>
    where
        K: Serialize + DeserializeOwned,
        V: Serialize + DeserializeOwned,
    {
        let variable = self.declare(name, StateKind::Map, ttl.into())?;
        Ok(MapState::new(name, variable, self.store.clone()))
    }

    /// The timers handle; timers need a time mode other than [`TimeMode::None`].
    pub fn timers(&self) -> Timers {
        Timers::new(self.store.clone())
    }

    /// Declares the schema of the rows the processor outputs (empty by default).
    pub fn set_output_schema(&mut self, schema: Schema) {
        self.spec.output_schema = Rc::new(schema);
    }

    /// Declares how timers are driven ([`TimeMode::None`] by default).
    pub fn set_time_mode(&mut self, mode: TimeMode) {
        self.spec.time_mode = mode;
        self.store.set_time_mode(mode);
    }

    /// Sets the schema of the initial-state rows, so that `handle_initial_state` can
    /// read them by name and the SDK checks their types. In a component the host
    /// already sets it from the pipeline's `operator.initial-state.schema` (a call here
    /// replaces it); in the test harness, call it to feed initial state.
    pub fn set_initial_state_schema(&mut self, schema: Schema) {
        self.spec.initial_state_schema = Some(Rc::new(schema));
    }
}
