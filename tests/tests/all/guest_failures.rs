//! A misbehaving guest fails its batch with an error naming the module, the function
//! and the key, and nothing of that batch reaches the state store.

use std::time::Duration;

use eddy::pipeline::InstanceLimits;
use eddy::state::StateStore;
use eddy::wasm::{GuestError, GuestProblem, WasmRuntime};
use eddy_tests::{Scripted, cmd, load, repo_root, wasm};
use serde_json::json;

fn value_config() -> serde_json::Value {
    json!({"time_mode": "none", "state": [{"name": "v", "kind": "value"}]})
}

/// `file:line:column` (1-based) of the first occurrence of `code` in the repository
/// file `path`: where a panic there is reported.
fn source_location(path: &str, code: &str) -> String {
    let text = std::fs::read_to_string(repo_root().join(path)).expect("source");
    let (index, line) = text.lines().enumerate().find(|(_, line)| line.contains(code)).expect("code in source");
    let column = line.find(code).expect("code in line") + 1;
    format!("{path}:{}:{column}", index + 1)
}

fn guest_error(error: &anyhow::Error) -> &GuestError {
    error.downcast_ref::<GuestError>().unwrap_or_else(|| panic!("not a guest error: {error:#}"))
}

/// A Rust processor's panic fails the batch with its message and location, as a
/// Python or JavaScript exception does: the SDK's panic hook logs them at error level
/// before the instance aborts, and the host names what was logged as the abort's cause.
#[test]
fn a_panic_names_its_message_and_location_with_module_function_and_key_and_commits_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let module = load("scripted");
    let store = StateStore::open(&dir.path().join("state")).expect("store");
    let mut p = Scripted::open(&module, store.clone(), value_config(), InstanceLimits::default());
    p.run(1_000, &[cmd("boom", "value.set", "v").v("kept")]).expect("batch 0");
    let error = p
        .run(2_000, &[cmd("boom", "value.set", "v").v("lost"), cmd("boom", "trap", "v")])
        .expect_err("the guest panics");
    let guest = guest_error(&error);
    assert_eq!(
        (guest.module.as_str(), guest.function, guest.key.as_deref()),
        ("scripted.wasm", "handle-input-rows", Some(r#"["boom"]"#))
    );
    let panic_at = source_location("tests/guests/scripted/src/lib.rs", "panic!(\"scripted trap\")");
    let reason = format!("the processor panicked at {panic_at}: scripted trap");
    assert_eq!(guest.problem, GuestProblem::Aborted { reason: reason.clone(), output: String::new() });
    assert_eq!(
        error.to_string(),
        format!("module 'scripted.wasm' failed in handle-input-rows for key [\"boom\"]: {reason}")
    );
    // The failed batch left nothing: a new instance on the same store sees batch 0's value.
    assert_eq!(store.committed_batch().expect("readable"), Some(0));
    let mut restarted = Scripted::open(&module, store, value_config(), InstanceLimits::default());
    let rows = restarted.run(3_000, &[cmd("boom", "value.get", "v")]).expect("batch after restart");
    assert_eq!(rows, vec![("value.get".to_string(), r#""kept""#.to_string())]);
}

/// A panic in `init` is named the same way (there is no key yet to select, and none is).
#[test]
fn a_panic_in_init_names_its_message_and_location() {
    let config = json!({"time_mode": "none", "state": [], "panic_in_init": true});
    let Err(error) = Scripted::try_new(config, InstanceLimits::default()) else { panic!("init panics") };
    let guest = guest_error(&error);
    let panic_at = source_location("tests/guests/scripted/src/lib.rs", "panic!(\"scripted init panic\")");
    let reason = format!("the processor panicked at {panic_at}: scripted init panic");
    assert_eq!((guest.function, guest.key.as_deref()), ("init", None));
    assert_eq!(guest.problem, GuestProblem::Aborted { reason: reason.clone(), output: String::new() });
    assert_eq!(error.to_string(), format!("module 'scripted.wasm' failed in init: {reason}"));
}

#[test]
fn an_endless_loop_hits_the_call_deadline() {
    let limits = InstanceLimits { call_timeout: Duration::from_millis(300), ..InstanceLimits::default() };
    let mut p = Scripted::new(value_config(), limits);
    let error = p.run(1_000, &[cmd("spin", "loop", "v")]).expect_err("the guest never returns");
    assert_eq!(guest_error(&error).problem, GuestProblem::Timeout(Duration::from_millis(300)));
    assert_eq!(
        error.to_string(),
        r#"module 'scripted.wasm' ran past its 300 ms deadline in handle-input-rows for key ["spin"]; fix the endless loop, or raise operator.call-timeout-ms if the work is legitimate"#
    );
}

#[test]
fn growing_memory_past_the_cap_is_stopped() {
    let limits = InstanceLimits { memory_cap_bytes: 32 << 20, ..InstanceLimits::default() };
    let mut p = Scripted::new(value_config(), limits);
    let error = p.run(1_000, &[cmd("hog", "grow", "v")]).expect_err("the guest wants more memory");
    let GuestProblem::MemoryCap { cap_bytes, requested_bytes } = guest_error(&error).problem else {
        panic!("not a memory-cap error: {error}");
    };
    assert_eq!(cap_bytes, 32 << 20);
    assert!(requested_bytes > cap_bytes, "asked for {requested_bytes}");
    let asked = requested_bytes.div_ceil(1 << 20);
    assert_eq!(
        error.to_string(),
        format!(
            "module 'scripted.wasm' exceeded its memory cap of 32 MiB in handle-input-rows for key [\"hog\"] (it asked for {asked} MiB); keep less in guest memory, or raise operator.memory-limit-mb"
        )
    );
}

#[test]
fn an_error_returned_by_the_guest_fails_the_batch() {
    let mut p = Scripted::new(value_config(), InstanceLimits::default());
    let error = p.run(1_000, &[cmd("k", "fail", "v").v("input is inconsistent")]).expect_err("the guest fails");
    assert_eq!(
        error.to_string(),
        r#"module 'scripted.wasm' failed in handle-input-rows for key ["k"]: row 0 (fail): input is inconsistent"#
    );
}

#[test]
fn opening_an_undeclared_variable_is_refused() {
    let mut p = Scripted::new(value_config(), InstanceLimits::default());
    let error = p.run(1_000, &[cmd("k", "open-undeclared", "nope")]).expect_err("not declared");
    assert_eq!(
        error.to_string(),
        r#"module 'scripted.wasm' trapped in handle-input-rows for key ["k"]: state variable 'nope' was not declared in init (declared: v); declare it in the processor spec"#
    );
}

/// A call hands over several keys; whichever of them fails, the error names it.
#[test]
fn a_failure_in_a_call_over_several_keys_names_the_key_that_failed() {
    let mut p = Scripted::new(value_config(), InstanceLimits::default());
    let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
    let mut commands: Vec<_> = keys.iter().map(|key| cmd(key, "value.set", "v").v("x")).collect();
    commands.push(cmd("k37", "fail", "").v("k37 is broken"));
    let error = p.run(1_000, &commands).expect_err("one key fails");
    assert_eq!(
        error.to_string(),
        r#"module 'scripted.wasm' failed in handle-input-rows for key ["k37"]: row 1 (fail): k37 is broken"#
    );
}

/// A timer handler that fails, or panics, has its own key named (taking a timer
/// selects its key), not that of a timer before it.
#[test]
fn a_failing_timer_handler_names_its_key() {
    let config = json!({"time_mode": "processing-time", "state": []});
    // The scripted handler of a timer ending in 7 fails, of one ending in 8 panics.
    for (expiry, problem) in [
        ("1007", "failed in handle-expired-timers for key [\"b\"]: timer 1007 failed"),
        ("1008", "failed in handle-expired-timers for key [\"b\"]: the processor panicked at "),
    ] {
        let mut p = Scripted::new(config.clone(), InstanceLimits::default());
        let register = |key, at| cmd(key, "timer.register", "").v(at);
        p.run(0, &[register("a", "1000"), register("a", "1001"), register("b", expiry), register("c", "1010")])
            .expect("timers registered");
        let error = p.run(2, &[]).expect_err("a timer handler fails").to_string();
        assert!(error.starts_with(&format!("module 'scripted.wasm' {problem}")), "{error}");
    }
}

/// The `scope` imports refuse indexes that are not the call's, naming the module,
/// the handler and the key that was current.
#[test]
fn selecting_a_key_or_taking_a_timer_that_is_not_the_call_s_traps() {
    let mut p = Scripted::new(value_config(), InstanceLimits::default());
    let error = p.run(1_000, &[cmd("k", "scope.select", "").v("7")]).expect_err("no key 7");
    assert_eq!(
        error.to_string(),
        r#"module 'scripted.wasm' trapped in handle-input-rows for key ["k"]: select-key named key 7 of a call over 1 keys; the processor's SDK selects each key of the call in turn"#
    );
    let mut p = Scripted::new(value_config(), InstanceLimits::default());
    let error = p.run(1_000, &[cmd("k", "scope.take", "").v("0")]).expect_err("no timers");
    assert_eq!(
        error.to_string(),
        r#"module 'scripted.wasm' trapped in handle-input-rows for key ["k"]: take-timer named timer 0 of a call over 0 timers; take-timer is only for the timers of the current handle-expired-timers call"#
    );
}

#[test]
fn apply_changes_refuses_a_malformed_record_and_makes_a_well_formed_one_as_its_own_call_would() {
    let config =
        json!({"time_mode": "event-time", "state": [{"name": "v", "kind": "value"}, {"name": "m", "kind": "map"}]});
    // Records as wit/processor.wit lays them out, by hand: kind byte, little-endian fields.
    let cases = [
        (
            "01 07000000",
            "apply-changes named key 7 of a call over 1 keys; the processor's SDK writes the key of each change",
        ),
        // Without a key record, the current key's (the SDK selected "k").
        ("05 00000000", "apply-changes used state variable 0 ('v', Value) as another kind"),
        (
            "01 00000000 09",
            "apply-changes holds a record of kind 9 at byte 5, which this contract does not have (1 to 7); \
             rebuild the module with an eddy-guest SDK of this contract",
        ),
        (
            "01 00000000 04 01000000 05000000 6162",
            "a record of apply-changes is cut short: it needs 5 more bytes at byte 14, the changes end at 16",
        ),
        ("01 00000000 02 01000000 00000000", "apply-changes used state variable 1 ('m', Map) as another kind"),
        (
            "01 00000000 03 05000000",
            "apply-changes named state variable 5, but the processor declared 2 (numbered from 0 in the order of its spec)",
        ),
    ];
    for (hex, problem) in cases {
        let mut p = Scripted::new(config.clone(), InstanceLimits::default());
        let error = p.run(1_000, &[cmd("k", "changes.raw", "").v(hex)]).expect_err(hex);
        assert_eq!(
            error.to_string(),
            format!(r#"module 'scripted.wasm' trapped in handle-input-rows for key ["k"]: {problem}"#),
            "{hex}"
        );
    }
    // Entry "a" -> "x" (CBOR text 61 61, 61 78) of map 1, a timer at 16 (10 00.. as s64),
    // and the value of variable 0 (set a batch before) cleared: what map.get, read and
    // timer.list then see.
    let mut p = Scripted::new(config, InstanceLimits::default());
    p.run(1_000, &[cmd("k", "value.set", "v").v("1")]).expect("set");
    let out = p
        .run(
            1_000,
            &[
                cmd("k", "read.raw", "0").v("0"),
                cmd("k", "changes.raw", "")
                    .v("01 00000000 04 01000000 02000000 6161 02000000 6178 06 1000000000000000 03 00000000"),
                cmd("k", "map.get", "m").k("a"),
                cmd("k", "read.raw", "1").k("6161").v("0"),
                cmd("k", "read.raw", "0").v("0"),
                cmd("k", "value.get", "v"),
                cmd("k", "timer.list", ""),
            ],
        )
        .expect("applied");
    let results: Vec<&str> = out.iter().map(|(_, result)| result.as_str()).collect();
    // "1" in CBOR is 61 31.
    assert_eq!(results, [r#""6131""#, "null", r#""x""#, r#""6178""#, "null", "null", "[16]"]);
}

#[test]
fn apply_changes_of_random_bytes_applies_them_or_traps_and_never_fails_the_host() {
    let config =
        json!({"time_mode": "event-time", "state": [{"name": "v", "kind": "value"}, {"name": "m", "kind": "map"}]});
    // Records whose kinds and small fields are likely, so that most get past the first byte.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let (mut applied, mut trapped) = (0, 0);
    for _ in 0..100 {
        let len = next(40) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| if next(2) == 0 { next(9) as u8 } else { next(256) as u8 }).collect();
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        let mut p = Scripted::new(config.clone(), InstanceLimits::default());
        match p.run(1_000, &[cmd("k", "changes.raw", "").v(&hex), cmd("k", "map.entries", "m")]) {
            Ok(_) => applied += 1,
            Err(error) => {
                let message = error.to_string();
                assert!(
                    message.starts_with(r#"module 'scripted.wasm' trapped in handle-input-rows for key ["k"]: "#),
                    "{hex}: {message}"
                );
                trapped += 1;
            }
        }
    }
    assert!(applied > 0 && trapped > 0, "{applied} applied, {trapped} trapped");
}

#[test]
fn a_module_for_another_contract_version_is_refused() {
    let runtime = WasmRuntime::new(None).expect("runtime");
    let error = runtime.load(&wasm("future_contract")).err().expect("refused");
    assert_eq!(
        error.to_string(),
        "module 'future_contract.wasm' was built for eddy:processor@1.0.0, but this eddy implements eddy:processor@0.3.1; \
         rebuild the module against the 0.3.1 contract (eddy-guest 0.3.1) or run an eddy that implements 1.0.0"
    );
}

/// A module of the contract's previous patch version (0.3.0: the same functions but
/// `state.prefetch`) links and runs: here the scripted processor with every
/// `@0.3.1` of its imports and exports renamed `@0.3.0`.
#[test]
fn a_module_for_the_previous_patch_version_runs() {
    let bytes = std::fs::read(wasm("scripted")).expect("scripted.wasm");
    let (new, old) = (b"@0.3.1".as_slice(), b"@0.3.0".as_slice());
    let mut patched = bytes.clone();
    let mut renamed = 0;
    for at in 0..bytes.len().saturating_sub(new.len()) {
        if &bytes[at..at + new.len()] == new {
            patched[at..at + new.len()].copy_from_slice(old);
            renamed += 1;
        }
    }
    assert!(renamed >= 5, "the handler and four imported interfaces are versioned: {renamed} renamed");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("scripted.wasm");
    std::fs::write(&path, &patched).expect("written");
    let module = WasmRuntime::new(None).expect("runtime").load(&path).expect("a 0.3.0 module loads");
    let store = StateStore::open(&dir.path().join("state")).expect("store");
    let mut p = Scripted::open(&module, store, value_config(), InstanceLimits::default());
    p.run(1_000, &[cmd("k", "value.set", "v").v("old contract")]).expect("batch 0");
    let out = p.run(2_000, &[cmd("k", "value.get", "v")]).expect("batch 1");
    assert_eq!(out, vec![("value.get".to_string(), r#""old contract""#.to_string())]);
}

#[test]
fn the_whole_output_of_a_failing_call_is_shown_up_to_4_kib() {
    // A Python-like traceback: its message is on its last lines but one.
    let traceback = "Traceback (most recent call last):\n  File \"processor.py\", line 12, in handle\n    total += row[\"amount\"]\nTypeError: unsupported operand type(s) for +=: 'int' and 'str'\n";
    let mut p = Scripted::new(value_config(), InstanceLimits::default());
    let error = p.run(1_000, &[cmd("k", "print", "").v(traceback), cmd("k", "trap", "")]).expect_err("traps");
    let GuestProblem::Aborted { reason, output } = &guest_error(&error).problem else {
        panic!("not an abort: {error}")
    };
    assert_eq!(output, traceback.trim_end());
    assert!(reason.ends_with("scripted trap"), "{reason}");

    // 10 000 bytes written: the last 4 KiB are shown, after a mark.
    let long = format!("{}\n", "x".repeat(9_999));
    let mut p = Scripted::new(value_config(), InstanceLimits::default());
    let error = p.run(1_000, &[cmd("k", "print", "").v(&long), cmd("k", "trap", "")]).expect_err("traps");
    let GuestProblem::Aborted { output, .. } = &guest_error(&error).problem else { panic!("not an abort: {error}") };
    let kept = output.strip_prefix('…').expect("marked as cut");
    assert!(kept.len() <= 4096 && kept.starts_with("xxx"), "{} bytes: {kept}", kept.len());
    let x_run = kept.bytes().take_while(|b| *b == b'x').count();
    assert!(x_run > 4096 - 300 && x_run < 9_999, "{x_run} x kept");
    assert!(!kept.contains("RUST_BACKTRACE"), "{kept}");
}

#[test]
fn a_stack_overflow_is_named_with_the_recursing_function() {
    // Small frames exhaust wasmtime's call stack; 4 KiB of locals per frame exhaust the
    // guest's own stack in its linear memory first (an out-of-bounds access).
    for (how, function) in [("plain", "scripted::recurse_plain"), ("locals", "scripted::recurse_with_locals")] {
        let mut p = Scripted::new(value_config(), InstanceLimits::default());
        let error = p.run(1_000, &[cmd("deep", "recurse", "").v(how)]).expect_err("the stack overflows");
        assert_eq!(
            guest_error(&error).problem,
            GuestProblem::StackOverflow { recursing: Some(function.to_string()) },
            "{how}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "module 'scripted.wasm' overflowed its stack in handle-input-rows for key [\"deep\"] (recursing in \
                 {function}): deep or endless recursion; bound it, or make it iterative"
            )
        );
    }
}

#[test]
fn memory_over_the_cap_at_instantiation_names_the_spec_key_to_raise() {
    let small = InstanceLimits { memory_cap_bytes: 1 << 20, ..InstanceLimits::default() };
    let error = load("scripted").instantiate(small).err().expect("its memory is over 1 MiB from the start");
    let GuestProblem::MemoryCap { cap_bytes, requested_bytes } = guest_error(&error).problem else {
        panic!("not a memory-cap error: {error}");
    };
    assert_eq!(cap_bytes, 1 << 20);
    assert!(requested_bytes > cap_bytes, "asked for {requested_bytes}");
    assert_eq!(
        error.to_string(),
        format!(
            "module 'scripted.wasm' exceeded its memory cap of 1 MiB in instantiation (it asked for {} MiB); keep \
             less in guest memory, or raise operator.memory-limit-mb",
            requested_bytes.div_ceil(1 << 20)
        )
    );
}
