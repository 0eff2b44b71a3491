//! A processor driven by command rows, so that host tests can exercise every state and
//! timer operation, and misbehaviour, through the real component boundary.
//!
//! Input schema `op STRING, name STRING, k STRING, v STRING` (all nullable); output
//! schema `op STRING, result STRING`: one row per command, `result` being compact
//! JSON text. Rows run in order; the grouping key scopes state and timers.
//!
//! Config (JSON):
//! `{"time_mode": "none" | "processing-time" | "event-time", "state": [{"name": "v1",
//! "kind": "value" | "list" | "map", "ttl_ms": 1000}], "deleted": ["old"],
//! "accepts_late_rows": true}` — `time_mode` defaults to `none`, `state` and `deleted`
//! (variables deleted with `delete_if_exists`) to `[]`, `ttl_ms` to no TTL,
//! `accepts_late_rows` to `false`. State values are strings.
//! `"panic_in_init": true` makes `init` panic with `scripted init panic`.
//!
//! | op                | uses      | result                                          |
//! |-------------------|-----------|-------------------------------------------------|
//! | `value.get`       | name      | `"x"` or `null`                                 |
//! | `value.set`       | name, v   | `null`                                          |
//! | `value.exists`    | name      | `true` / `false`                                |
//! | `value.clear`     | name      | `null`                                          |
//! | `list.get`        | name      | `["a","b"]`                                     |
//! | `list.append`     | name, v   | `null`; v is a JSON array of strings, or any other text as one string |
//! | `list.put`        | name, v   | `null`; v as for `list.append`                  |
//! | `list.exists`     | name      | `true` / `false`                                |
//! | `list.clear`      | name      | `null`                                          |
//! | `map.get`         | name, k   | `"v"` or `null`                                 |
//! | `map.put`         | name, k, v| `null`                                          |
//! | `map.contains`    | name, k   | `true` / `false`                                |
//! | `map.remove`      | name, k   | `null`                                          |
//! | `map.keys`        | name      | `["k1","k2"]` in the host's order               |
//! | `map.values`      | name      | `["v1","v2"]` in the host's order               |
//! | `map.entries`     | name      | `{"k1":"v1","k2":"v2"}` in the host's order     |
//! | `map.exists`      | name      | `true` / `false`                                |
//! | `map.clear`       | name      | `null`                                          |
//! | `timer.register`  | v         | `null`; v = expiry in microseconds              |
//! | `timer.delete`    | v         | `null`                                          |
//! | `timer.list`      | —         | `[1000,2000]`                                   |
//! | `log`             | name, v   | `null`; logs v at level name (trace … error, default info) |
//! | `log.many`        | name, v   | `null`; v = `COUNTxBYTES`: logs COUNT messages of BYTES bytes at level name |
//! | `timer.register-many` | v     | `null`; registers v timers, at 4e15 µs (year 2096) and the v - 1 microseconds after |
//! | `map.put-many`    | name, v   | `null`; v = `COUNTxBYTES`: puts COUNT entries (keys `0`, `1`, …) of a BYTES-long string |
//! | `output.many`     | v         | v = `COUNTxBYTES`: outputs COUNT rows `("output.many", a BYTES-long string)` instead of a result row |
//! | `fail`            | v         | the call returns `Err(v)` (default `scripted failure`) |
//! | `trap`            | —         | panics with `scripted trap` (the instance traps) |
//! | `loop`            | —         | never returns (for the host's call deadline)    |
//! | `sleep`           | v         | `null`; sleeps v seconds (`std::thread::sleep`) |
//! | `print`           | v         | `null`; writes v to stderr as it is             |
//! | `recurse`         | v         | recurses without end: v = `plain` (small frames) or `locals` (4 KiB of locals per frame) |
//! | `grow`            | —         | allocates 1 MiB blocks until memory runs out    |
//! | `alloc`           | v         | `null`; allocates and touches v MiB, then frees them |
//! | `open-undeclared` | name      | opens value state `name` (default `undeclared`) without declaring it: the host traps |
//! | `sandbox.clock`   | —         | the WASI wall clock, microseconds since the epoch |
//! | `sandbox.random`  | —         | a JSON number: a `u64` from WASI random          |
//! | `sandbox.env`     | —         | `[env var count, arg count]`                    |
//! | `sandbox.fs`      | v         | whether reading file v (default `/etc/passwd`) succeeded: `true` / `false` |
//! | `scope.select`    | v         | calls the raw `select-key(v)` import (a misbehaving SDK) |
//! | `scope.take`      | v         | calls the raw `take-timer(v)` import: `true` / `false` |
//! | `changes.raw`     | v         | `null`; calls the raw `apply-changes` import with v, hex (a misbehaving SDK) |
//! | `read.raw`        | name, k, v| the raw `read(variable, key, user key)` import: `name` = the variable's place, v = the key index, k = the user key (hex); the value in hex or `null` |
//! | `query.info`      | —         | `["query id","run id"]` as `init` was told      |
//! | `batch.id`        | —         | the batch id of the call's timer values         |
//!
//! A timer that fires outputs `op = "timer.fired"`, `result` = its expiry (a JSON
//! number). A timer whose expiry ends in 1 (`expiry % 10 == 1`) also deletes the key's
//! timer at `expiry + 1` and registers one at `expiry + 2` when it fires; one ending in
//! 7 fails the call (`Err("timer EXPIRY failed")`), one ending in 8 panics (the
//! instance traps). Initial-state rows are commands in the same schema; their output is
//! dropped. Bad commands (unknown op, missing field, undeclared name) fail the call.

use std::collections::HashMap;
use std::time::Duration;

use eddy_guest::log::{Level, log};
use eddy_guest::{
    Error, ExpiredTimer, InitContext, Key, ListState, MapState, Output, Result, Row, Rows, Schema, StatefulProcessor,
    TimeMode, TimerValues, Timers, Ttl, ValueState, bail, export_processor, row,
};
use serde::Deserialize;

/// Bytes from hex text (whitespace ignored).
fn unhex(text: &str) -> Result<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|byte| !byte.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| Error::msg(format!("`{text}` is not hex")))
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "no_time_mode")]
    time_mode: String,
    #[serde(default)]
    state: Vec<Declaration>,
    #[serde(default)]
    deleted: Vec<String>,
    #[serde(default)]
    accepts_late_rows: bool,
    /// Panics in `init` with `scripted init panic`.
    #[serde(default)]
    panic_in_init: bool,
}

fn no_time_mode() -> String {
    "none".to_string()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Declaration {
    name: String,
    kind: String,
    ttl_ms: Option<u64>,
}

struct Scripted {
    values: HashMap<String, ValueState<String>>,
    lists: HashMap<String, ListState<String>>,
    maps: HashMap<String, MapState<String, String>>,
    timers: Timers,
    /// The query and run ids `init` was told.
    query: [String; 2],
    /// The batch id of the current call.
    batch_id: u64,
}

/// A row's fields.
struct Command<'a> {
    op: &'a str,
    name: Option<&'a str>,
    k: Option<&'a str>,
    v: Option<&'a str>,
}

impl<'a> Command<'a> {
    fn parse(row: &Row<'a>) -> Result<Self> {
        let op = row.str_opt("op")?.ok_or_else(|| Error::msg("op is null"))?;
        Ok(Command { op, name: row.str_opt("name")?, k: row.str_opt("k")?, v: row.str_opt("v")? })
    }

    fn need(&self, field: &str, value: Option<&'a str>) -> Result<&'a str> {
        value.ok_or_else(|| Error::msg(format!("`{}` needs `{field}`", self.op)))
    }

    fn name(&self) -> Result<&'a str> {
        self.need("name", self.name)
    }

    fn k(&self) -> Result<String> {
        Ok(self.need("k", self.k)?.to_string())
    }

    fn v(&self) -> Result<&'a str> {
        self.need("v", self.v)
    }

    fn micros(&self) -> Result<i64> {
        let v = self.v()?;
        v.parse().map_err(|_| Error::msg(format!("`{}` needs v = microseconds, got `{v}`", self.op)))
    }

    /// v as an index of the call's keys or timers.
    fn index(&self) -> Result<u32> {
        let v = self.v()?;
        v.parse().map_err(|_| Error::msg(format!("`{}` needs v = an index, got `{v}`", self.op)))
    }

    /// v as `COUNTxBYTES`.
    fn count_and_bytes(&self) -> Result<(usize, usize)> {
        let v = self.v()?;
        let parsed = v.split_once('x').and_then(|(count, bytes)| Some((count.parse().ok()?, bytes.parse().ok()?)));
        parsed.ok_or_else(|| Error::msg(format!("`{}` needs v = COUNTxBYTES, got `{v}`", self.op)))
    }

    /// v as a list: a JSON array of strings, or one string.
    fn list(&self) -> Result<Vec<String>> {
        let v = self.v()?;
        if v.trim_start().starts_with('[') {
            serde_json::from_str(v).map_err(|e| Error::msg(format!("v is not a JSON array of strings: {e}")))
        } else {
            Ok(vec![v.to_string()])
        }
    }
}

fn json(value: impl serde::Serialize) -> Result<String> {
    Ok(serde_json::to_string(&value)?)
}

fn find<'s, T>(vars: &'s HashMap<String, T>, kind: &str, name: &str) -> Result<&'s T> {
    vars.get(name)
        .ok_or_else(|| Error::msg(format!("no {kind} state `{name}` is declared in the config's `state` list")))
}

impl Scripted {
    fn run(&self, cmd: &Command<'_>) -> Result<String> {
        let null = || Ok("null".to_string());
        match cmd.op {
            "value.get" => json(find(&self.values, "value", cmd.name()?)?.get()?),
            "value.set" => find(&self.values, "value", cmd.name()?)?.update(&cmd.v()?.to_string()).and_then(|_| null()),
            "value.exists" => json(find(&self.values, "value", cmd.name()?)?.exists()?),
            "value.clear" => find(&self.values, "value", cmd.name()?)?.clear().and_then(|_| null()),
            "list.get" => json(find(&self.lists, "list", cmd.name()?)?.get()?),
            "list.append" => find(&self.lists, "list", cmd.name()?)?.append_list(&cmd.list()?).and_then(|_| null()),
            "list.put" => find(&self.lists, "list", cmd.name()?)?.put(&cmd.list()?).and_then(|_| null()),
            "list.exists" => json(find(&self.lists, "list", cmd.name()?)?.exists()?),
            "list.clear" => find(&self.lists, "list", cmd.name()?)?.clear().and_then(|_| null()),
            "map.get" => json(find(&self.maps, "map", cmd.name()?)?.get(&cmd.k()?)?),
            "map.put" => {
                find(&self.maps, "map", cmd.name()?)?.update(&cmd.k()?, &cmd.v()?.to_string()).and_then(|_| null())
            }
            "map.contains" => json(find(&self.maps, "map", cmd.name()?)?.contains(&cmd.k()?)?),
            "map.remove" => find(&self.maps, "map", cmd.name()?)?.remove(&cmd.k()?).and_then(|_| null()),
            "map.keys" => json(find(&self.maps, "map", cmd.name()?)?.keys()?),
            "map.values" => json(find(&self.maps, "map", cmd.name()?)?.values()?),
            "map.entries" => {
                // Built by hand: a JSON map type would reorder the host's order.
                let entries: Result<Vec<String>> = find(&self.maps, "map", cmd.name()?)?
                    .iter()?
                    .map(|(k, v)| Ok(format!("{}:{}", json(k)?, json(v)?)))
                    .collect();
                Ok(format!("{{{}}}", entries?.join(",")))
            }
            "map.exists" => json(find(&self.maps, "map", cmd.name()?)?.exists()?),
            "map.clear" => find(&self.maps, "map", cmd.name()?)?.clear().and_then(|_| null()),
            "timer.register" => self.timers.register(cmd.micros()?).and_then(|_| null()),
            "timer.delete" => self.timers.delete(cmd.micros()?).and_then(|_| null()),
            "timer.list" => json(self.timers.list()?),
            "scope.select" => {
                eddy_guest::bindings::eddy::processor::scope::select_key(cmd.index()?);
                null()
            }
            "scope.take" => json(eddy_guest::bindings::eddy::processor::scope::take_timer(cmd.index()?)),
            "changes.raw" => {
                eddy_guest::bindings::eddy::processor::state::apply_changes(&unhex(cmd.v()?)?);
                null()
            }
            "read.raw" => {
                let variable: u32 =
                    cmd.name()?.parse().map_err(|_| Error::msg("read.raw: name is a variable's place"))?;
                let user_key = unhex(cmd.k.unwrap_or_default())?;
                let value = eddy_guest::bindings::eddy::processor::state::read(variable, cmd.index()?, &user_key);
                json(value.map(|bytes| bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>()))
            }
            "query.info" => json(&self.query),
            "batch.id" => json(self.batch_id),
            "timer.register-many" => {
                let count: i64 = cmd.v()?.parse().map_err(|_| Error::msg("timer.register-many: v is a count"))?;
                for i in 0..count {
                    self.timers.register(4_000_000_000_000_000 + i)?;
                }
                null()
            }
            "map.put-many" => {
                let map = find(&self.maps, "map", cmd.name()?)?;
                let (count, bytes) = cmd.count_and_bytes()?;
                let value = "x".repeat(bytes);
                for i in 0..count {
                    map.update(&i.to_string(), &value)?;
                }
                null()
            }
            "log.many" => {
                let level = log_level(cmd.name)?;
                let (count, bytes) = cmd.count_and_bytes()?;
                let message = "x".repeat(bytes);
                for _ in 0..count {
                    log(level, &message);
                }
                null()
            }
            "log" => {
                log(log_level(cmd.name)?, cmd.v.unwrap_or_default());
                null()
            }
            "output.many" => cmd.count_and_bytes().and_then(|_| null()),
            "fail" => Err(Error::msg(cmd.v.unwrap_or("scripted failure"))),
            "trap" => panic!("scripted trap"),
            "loop" => spin(),
            "print" => {
                eprint!("{}", cmd.v()?);
                null()
            }
            "recurse" => match cmd.v()? {
                "plain" => json(recurse_plain(0)),
                "locals" => json(recurse_with_locals(0)),
                other => bail!("recurse: v is `plain` or `locals`, not `{other}`"),
            },
            "sleep" => {
                let seconds: f64 = cmd.v()?.parse().map_err(|_| Error::msg("sleep: v is a number of seconds"))?;
                std::thread::sleep(Duration::from_secs_f64(seconds));
                null()
            }
            "grow" => grow(),
            "alloc" => {
                let mib: usize = cmd.v()?.parse().map_err(|_| Error::msg("alloc: v is a MiB count"))?;
                drop(std::hint::black_box(vec![1u8; mib << 20]));
                null()
            }
            "open-undeclared" => open_undeclared(cmd.name.unwrap_or("undeclared")),
            "sandbox.clock" => {
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_err(|e| Error::msg(e.to_string()))?;
                json(wall.as_micros() as i64)
            }
            "sandbox.random" => {
                let value = getrandom::u64().map_err(|e| Error::msg(e.to_string()))?;
                json(value)
            }
            "sandbox.env" => json([std::env::vars_os().count(), std::env::args_os().count()]),
            "sandbox.fs" => json(std::fs::read(cmd.v.unwrap_or("/etc/passwd")).is_ok()),
            other => bail!("unknown op `{other}`; see the scripted guest's command table"),
        }
    }

    fn run_rows(&self, rows: &Rows, mut output: Option<&mut Output>) -> Result<()> {
        for row in rows.iter() {
            let cmd = Command::parse(&row)?;
            let result = self.run(&cmd).map_err(|e| e.context(format!("row {} ({})", row.index(), cmd.op)))?;
            if let Some(output) = output.as_deref_mut() {
                if cmd.op == "output.many" {
                    let (count, bytes) = cmd.count_and_bytes()?;
                    let value = "x".repeat(bytes);
                    for _ in 0..count {
                        output.append_row(&row![cmd.op, value.as_str()])?;
                    }
                } else {
                    output.append_row(&row![cmd.op, result.as_str()])?;
                }
            }
        }
        Ok(())
    }
}

/// The log level `name` names (default info).
fn log_level(name: Option<&str>) -> Result<Level> {
    Ok(match name.unwrap_or("info") {
        "trace" => Level::Trace,
        "debug" => Level::Debug,
        "info" => Level::Info,
        "warn" => Level::Warn,
        "error" => Level::Error,
        other => bail!("unknown log level `{other}`; use trace, debug, info, warn or error"),
    })
}

/// Never returns; the host's deadline must stop it.
fn spin() -> ! {
    let mut spins: u64 = 0;
    loop {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
}

/// Recurses until the call stack runs out (the condition is never true).
#[inline(never)]
fn recurse_plain(depth: u64) -> u64 {
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    recurse_plain(depth + 1).wrapping_add(std::hint::black_box(depth))
}

/// Recurses with 4 KiB of locals per frame, kept in the guest's linear-memory stack.
#[inline(never)]
fn recurse_with_locals(depth: u64) -> u64 {
    let mut locals = [0u8; 4096];
    locals[depth as usize % 4096] = depth as u8;
    std::hint::black_box(&mut locals);
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    recurse_with_locals(depth + 1).wrapping_add(u64::from(locals[depth as usize % 4096]))
}

/// Allocates and touches 1 MiB blocks until an allocation fails (which aborts).
fn grow() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = vec![0u8; 1 << 20];
        for i in (0..block.len()).step_by(4096) {
            block[i] = 1;
        }
        hoard.push(std::hint::black_box(block));
    }
}

/// Opens a value state variable through the raw bindings, bypassing declaration.
fn open_undeclared(name: &str) -> Result<String> {
    let state = eddy_guest::bindings::eddy::processor::state::ValueState::new(name);
    json(state.exists())
}

impl StatefulProcessor for Scripted {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        let config: Config = ctx.config()?;
        if config.panic_in_init {
            panic!("scripted init panic");
        }
        ctx.set_time_mode(match config.time_mode.as_str() {
            "none" => TimeMode::None,
            "processing-time" => TimeMode::ProcessingTime,
            "event-time" => TimeMode::EventTime,
            other => bail!("unknown time_mode `{other}`; use none, processing-time or event-time"),
        });
        ctx.set_accepts_late_rows(config.accepts_late_rows);
        let schema = Schema::parse("op STRING, name STRING, k STRING, v STRING")?;
        ctx.set_initial_state_schema(schema);
        ctx.set_output_schema(Schema::parse("op STRING, result STRING")?);
        let query = [ctx.query_info().id.clone(), ctx.query_info().run_id.clone()];
        let mut scripted = Scripted {
            values: HashMap::new(),
            lists: HashMap::new(),
            maps: HashMap::new(),
            timers: ctx.timers(),
            query,
            batch_id: 0,
        };
        for name in &config.deleted {
            ctx.delete_if_exists(name);
        }
        for decl in config.state {
            let ttl = decl.ttl_ms.map_or(Ttl::NONE, |ms| Ttl::after(Duration::from_millis(ms)));
            match decl.kind.as_str() {
                "value" => drop(scripted.values.insert(decl.name.clone(), ctx.value_state(&decl.name, ttl)?)),
                "list" => drop(scripted.lists.insert(decl.name.clone(), ctx.list_state(&decl.name, ttl)?)),
                "map" => drop(scripted.maps.insert(decl.name.clone(), ctx.map_state(&decl.name, ttl)?)),
                other => bail!("state `{}` has unknown kind `{other}`; use value, list or map", decl.name),
            }
        }
        Ok(scripted)
    }

    fn handle_input_rows(&mut self, _: &Key, rows: &Rows, tv: &TimerValues, output: &mut Output) -> Result<()> {
        self.batch_id = tv.batch_id;
        self.run_rows(rows, Some(output))
    }

    fn handle_expired_timer(
        &mut self,
        _: &Key,
        _: &TimerValues,
        timer: &ExpiredTimer,
        output: &mut Output,
    ) -> Result<()> {
        match timer.expiry_time % 10 {
            1 => {
                self.timers.delete(timer.expiry_time + 1)?;
                self.timers.register(timer.expiry_time + 2)?;
            }
            7 => bail!("timer {} failed", timer.expiry_time),
            8 => panic!("timer {} panicked", timer.expiry_time),
            _ => {}
        }
        output.append_row(&row!["timer.fired", timer.expiry_time.to_string().as_str()])
    }

    fn handle_initial_state(&mut self, _: &Key, rows: &Rows, _: &TimerValues) -> Result<()> {
        self.run_rows(rows, None)
    }
}

export_processor!(Scripted);
