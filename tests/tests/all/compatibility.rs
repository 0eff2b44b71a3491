//! Restarting a query on an existing checkpoint: compatible changes keep the state,
//! incompatible ones are refused with what changed and the ways forward.

use std::path::Path;
use std::process::{Command, Output};

use eddy_tests::{eddy_bin, repo_root};

fn eddy_run(spec: &Path, checkpoint: &Path) -> Output {
    Command::new(eddy_bin())
        .args(["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")])
        .env("EDDY_LOG", "warn")
        .output()
        .expect("eddy runs")
}

/// A `scripted` pipeline whose processor declares `state` (TOML inline tables).
fn scripted_spec(dir: &Path, key: &str, key_groups: u16, state: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("input")).expect("input dir");
    let wasm = repo_root().join("build/wasm/scripted.wasm");
    let spec = format!(
        "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"key STRING, other STRING, op STRING, name STRING, k STRING, v STRING\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"{key}\"]\nkey-groups = {key_groups}\n\n\
         [operator.config]\ntime_mode = \"none\"\nstate = [{state}]\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
    );
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, spec).expect("spec");
    file
}

fn refusal(output: &Output) -> String {
    assert!(!output.status.success(), "the restart should be refused");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn incompatible_changes_are_refused_and_compatible_ones_accepted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let value = "{ name = \"v\", kind = \"value\" }";
    let spec = scripted_spec(dir.path(), "key", 8, value);
    std::fs::write(
        dir.path().join("input/1.jsonl"),
        "{\"key\":\"a\",\"op\":\"value.set\",\"name\":\"v\",\"v\":\"x\"}\n",
    )
    .expect("file");
    assert!(eddy_run(&spec, &checkpoint).status.success());
    let ways = "Either revert that change, or start from a new checkpoint (another --checkpoint directory) to begin with empty state";
    let expect_refusal = |spec: &Path, change: &str| {
        assert_eq!(
            refusal(&eddy_run(spec, &checkpoint)),
            format!(
                "error: the checkpoint {} holds state that this pipeline cannot use: {change}. {ways}\n",
                checkpoint.display()
            )
        );
    };
    expect_refusal(
        &scripted_spec(dir.path(), "other", 8, value),
        "the key columns changed from [\"key\"] to [\"other\"]",
    );
    expect_refusal(&scripted_spec(dir.path(), "key", 16, value), "the key-group count changed from 8 to 16");
    expect_refusal(
        &scripted_spec(dir.path(), "key", 8, "{ name = \"v\", kind = \"list\" }"),
        "state variable 'v' changed kind from value to list",
    );
    expect_refusal(
        &scripted_spec(dir.path(), "key", 8, "{ name = \"v\", kind = \"value\", ttl_ms = 5000 }"),
        "state variable 'v' changed TTL from none to 5000 ms",
    );
    expect_refusal(
        &scripted_spec(dir.path(), "key", 8, ""),
        "state variable 'v' (value) is no longer declared (to drop its data, delete it in init, like Spark's \
         deleteIfExists: ctx.delete_if_exists(\"v\"))",
    );
    // A refused restart changed nothing in the checkpoint.
    let metadata = std::fs::read_to_string(checkpoint.join("metadata")).expect("metadata");
    assert!(metadata.contains("\"keyGroups\": 8"), "{metadata}");
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint.join("state/_schema")).expect("_schema")).expect("json");
    assert_eq!(schema["operators"]["0"]["key_columns"], serde_json::json!(["key"]));
    assert_eq!(
        schema["operators"]["0"]["variables"],
        serde_json::json!([{"name": "v", "kind": "value", "ttl_us": null}])
    );

    // Adding a variable is fine, and the old state is still there.
    let spec = scripted_spec(dir.path(), "key", 8, &format!("{value}, {{ name = \"m\", kind = \"map\" }}"));
    std::fs::write(dir.path().join("input/2.jsonl"), "{\"key\":\"a\",\"op\":\"value.get\",\"name\":\"v\"}\n")
        .expect("file");
    let output = eddy_run(&spec, &checkpoint);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let part = std::fs::read_to_string(dir.path().join("out/part-00001.jsonl")).expect("part");
    assert_eq!(part, "{\"op\":\"value.get\",\"result\":\"\\\"x\\\"\"}\n");
}

/// A copy of a component with a custom section appended: another module (another
/// hash), the same behaviour and state schema.
fn new_version_of(module: &Path, into: &Path) {
    let mut bytes = std::fs::read(module).expect("module");
    let name = b"eddy-test-version";
    let payload = b"2";
    bytes.push(0); // custom section id
    bytes.push((1 + name.len() + payload.len()) as u8);
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(payload);
    std::fs::write(into, bytes).expect("new module");
}

#[test]
fn a_new_module_version_keeps_the_state() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("input")).expect("input dir");
    let checkpoint = dir.path().join("checkpoint");
    let v1 = repo_root().join("build/wasm/running_count.wasm");
    let v2 = dir.path().join("running_count_v2.wasm");
    new_version_of(&v1, &v2);
    let spec = |module: &Path| {
        let text = format!(
            "[[source]]\nformat = \"json\"\npath = \"input\"\nschema = \"user STRING, amount BIGINT\"\n\n\
             [operator]\nmodule = {module:?}\nkey = [\"user\"]\noutput-mode = \"update\"\n\n\
             [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n"
        );
        let file = dir.path().join("pipeline.toml");
        std::fs::write(&file, text).expect("spec");
        file
    };
    std::fs::write(dir.path().join("input/1.jsonl"), "{\"user\":\"u\",\"amount\":5}\n").expect("file");
    assert!(eddy_run(&spec(&v1), &checkpoint).status.success());
    let recorded_module = || {
        let schema: serde_json::Value =
            serde_json::from_slice(&std::fs::read(checkpoint.join("state/_schema")).expect("_schema")).expect("json");
        schema["operators"]["0"]["module_sha256"].as_str().expect("a module hash").to_string()
    };
    let v1_hash = recorded_module();
    std::fs::write(dir.path().join("input/2.jsonl"), "{\"user\":\"u\",\"amount\":6}\n").expect("file");
    let output = eddy_run(&spec(&v2), &checkpoint);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_ne!(recorded_module(), v1_hash, "the new module is recorded");
    let part = std::fs::read_to_string(dir.path().join("out/part-00001.jsonl")).expect("part");
    assert_eq!(part, "{\"user\":\"u\",\"count\":2,\"sum\":11}\n", "v2 continues v1's totals");
}

/// A `scripted` pipeline declaring `state`, with `memory-limit-mb` for the processor.
fn scripted_spec_with_memory(dir: &Path, state: &str, memory_limit_mb: u32) -> std::path::PathBuf {
    let file = scripted_spec(dir, "key", 8, state);
    let spec = std::fs::read_to_string(&file).expect("spec");
    let spec = spec.replace("key-groups = 8\n", &format!("key-groups = 8\nmemory-limit-mb = {memory_limit_mb}\n"));
    std::fs::write(&file, spec).expect("spec");
    file
}

#[test]
fn a_new_module_whose_first_batch_fails_can_be_reverted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let v1_state = "{ name = \"v\", kind = \"value\" }";
    let v1 = scripted_spec_with_memory(dir.path(), v1_state, 128);
    std::fs::write(
        dir.path().join("input/1.jsonl"),
        "{\"key\":\"a\",\"op\":\"value.set\",\"name\":\"v\",\"v\":\"x\"}\n",
    )
    .expect("file");
    let first = eddy_run(&v1, &checkpoint);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let schema_file = || std::fs::read_to_string(checkpoint.join("state/_schema")).expect("_schema");
    let v1_schema = schema_file();

    // "v2" adds a map variable and cannot run the next batch (it allocates past its cap).
    std::fs::write(dir.path().join("input/2.jsonl"), "{\"key\":\"a\",\"op\":\"alloc\",\"v\":\"64\"}\n").expect("file");
    let v2 = scripted_spec_with_memory(dir.path(), &format!("{v1_state}, {{ name = \"m\", kind = \"map\" }}"), 32);
    let failed = eddy_run(&v2, &checkpoint);
    assert!(!failed.status.success(), "v2's batch fails");
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("memory cap"),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    assert_eq!(schema_file(), v1_schema, "v2's schema was not recorded: its batch never committed");

    // Going back to v1 is accepted (v2's variable was never recorded) and runs the batch.
    let reverted = eddy_run(&scripted_spec_with_memory(dir.path(), v1_state, 128), &checkpoint);
    assert!(reverted.status.success(), "{}", String::from_utf8_lossy(&reverted.stderr));
    assert!(dir.path().join("out/part-00001.jsonl").exists(), "batch 1 ran with v1");
    assert_eq!(schema_file(), v1_schema);
}

/// Spark's `deleteIfExists`: a version that deletes a variable an earlier one declared
/// runs on the checkpoint, its first batch deletes that variable's data for every key
/// (the other variables keep theirs), and declaring the name again later starts empty.
#[test]
fn a_deleted_variable_loses_its_data_and_nothing_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let value = "{ name = \"v\", kind = \"value\" }";
    let map = "{ name = \"m\", kind = \"map\" }";
    let lines: String = ["a", "b", "c"]
        .iter()
        .map(|key| {
            format!(
                "{{\"key\":\"{key}\",\"op\":\"value.set\",\"name\":\"v\",\"v\":\"x\"}}\n\
                 {{\"key\":\"{key}\",\"op\":\"map.put\",\"name\":\"m\",\"k\":\"k1\",\"v\":\"1\"}}\n"
            )
        })
        .collect();
    let run = |state: &str, deleted: &str, commands: &str, file: &str| {
        let spec = scripted_spec(dir.path(), "key", 8, state);
        let text = std::fs::read_to_string(&spec).expect("spec");
        std::fs::write(&spec, text.replace("state = [", &format!("deleted = [{deleted}]\nstate = ["))).expect("spec");
        std::fs::write(dir.path().join(format!("input/{file}.jsonl")), commands).expect("file");
        let output = eddy_run(&spec, &checkpoint);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    run(&format!("{value}, {map}"), "", &lines, "1");
    let both = scripted_spec(dir.path(), "key", 8, &format!("{value}, {map}"));
    let text = std::fs::read_to_string(&both).expect("spec").replace("state = [", "deleted = [\"m\"]\nstate = [");
    std::fs::write(&both, text).expect("spec");
    assert!(
        refusal(&eddy_run(&both, &checkpoint)).contains(
            "module 'scripted.wasm' declared state variable 'm' and also deleted it (delete_if_exists); \
             declare it or delete it, not both"
        ),
        "a variable is declared or deleted"
    );

    // The next version declares only v and deletes m.
    let read = "{\"key\":\"a\",\"op\":\"value.get\",\"name\":\"v\"}\n";
    run(value, "\"m\", \"never-declared\"", read, "2");
    let part = std::fs::read_to_string(dir.path().join("out/part-00001.jsonl")).expect("part");
    assert_eq!(part, "{\"op\":\"value.get\",\"result\":\"\\\"x\\\"\"}\n", "v keeps its data");
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint.join("state/_schema")).expect("_schema")).expect("json");
    assert_eq!(
        schema["operators"]["0"]["variables"],
        serde_json::json!([{"name": "v", "kind": "value", "ttl_us": null}])
    );

    // Declared again, m starts empty for every key.
    let gets: String = ["a", "b", "c"]
        .iter()
        .map(|key| format!("{{\"key\":\"{key}\",\"op\":\"map.get\",\"name\":\"m\",\"k\":\"k1\"}}\n"))
        .collect();
    run(&format!("{value}, {map}"), "", &gets, "3");
    let part = std::fs::read_to_string(dir.path().join("out/part-00002.jsonl")).expect("part");
    assert_eq!(part, "{\"op\":\"map.get\",\"result\":\"null\"}\n".repeat(3), "m's data was deleted");
}

#[test]
fn reordering_sources_is_refused_as_an_incompatible_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, user) in [("a", "from-a"), ("b", "from-b")] {
        std::fs::create_dir_all(dir.path().join(name)).expect("input dir");
        std::fs::write(dir.path().join(format!("{name}/1.jsonl")), format!("{{\"user\":\"{user}\",\"amount\":1}}\n"))
            .expect("file");
    }
    let spec = |first: &str, second: &str, third: Option<&str>| {
        let source = |path: &str| {
            format!("[[source]]\nformat = \"json\"\npath = \"{path}\"\nschema = \"user STRING, amount BIGINT\"\n\n")
        };
        let text = format!(
            "{}{}{}[[stage]]\nsql = \"SELECT * FROM input\"\n\n\
             [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n",
            source(first),
            source(second),
            third.map(source).unwrap_or_default()
        );
        let file = dir.path().join("pipeline.toml");
        std::fs::write(&file, text).expect("spec");
        file
    };
    let checkpoint = dir.path().join("checkpoint");
    let first = eddy_run(&spec("a", "b", None), &checkpoint);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));

    let swapped = eddy_run(&spec("b", "a", None), &checkpoint);
    assert!(!swapped.status.success(), "sources keep their progress by position: a swap would mix them up");
    let error = String::from_utf8_lossy(&swapped.stderr);
    let recorded_b =
        format!("recorded [[source]] 1 as \"json {}\", which is now [[source]] 0", dir.path().join("b").display());
    assert!(error.contains(&recorded_b) && error.contains("reordering [[source]] entries"), "{error}");

    std::fs::create_dir_all(dir.path().join("c")).expect("input dir");
    let added = eddy_run(&spec("a", "b", Some("c")), &checkpoint);
    assert!(added.status.success(), "a source added at the end: {}", String::from_utf8_lossy(&added.stderr));
}
