//! Compiled modules are cached on disk, each file bound to its module and engine: a
//! file that is another module's, damaged, or without eddy's header is not loaded.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use arrow::datatypes::{DataType, Field, Schema};
use eddy::contract::OutputMode;
use eddy::operator::{OperatorOptions, WasmOperator};
use eddy::pipeline::{DEFAULT_SPILL_STATE_BYTES, InstanceLimits};
use eddy::wasm::{Module, WasmRuntime};
use eddy_tests::wasm;

fn load(cache: &Path, name: &str) -> Module {
    WasmRuntime::new(Some(cache.to_path_buf())).expect("runtime").load(&wasm(name)).expect("module loads")
}

/// The compiled-module files in `cache`.
fn artifacts(cache: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cache)
        .expect("cache dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .collect();
    files.sort();
    files
}

fn artifact_of(cache: &Path, module: &Module) -> PathBuf {
    let files: Vec<PathBuf> = artifacts(cache)
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|name| name.to_string_lossy().starts_with(&module.sha256)))
        .collect();
    assert_eq!(files.len(), 1, "one artifact per module: {files:?}");
    files[0].clone()
}

/// What the loaded code declares in `init`: its state variables' names.
fn declared_state(module: &Module) -> Vec<String> {
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("user", DataType::Utf8, true),
        Field::new("amount", DataType::Int64, true),
    ]));
    let options = OperatorOptions {
        operator_id: 0,
        key_columns: vec!["user".into()],
        key_groups: 4,
        output_mode: OutputMode::Update,
        config_json: "{}".into(),
        limits: InstanceLimits::default(),
        spill_state_bytes: DEFAULT_SPILL_STATE_BYTES,
        initial_state_schema: None,
        event_time_column: None,
        key_group_range: 0..4,
        query_id: "module-cache-test".into(),
        run_id: "module-cache-run".into(),
    };
    let operator = WasmOperator::open(module, &schema, options).expect("opens");
    operator.state_variables().into_iter().map(|decl| decl.name).collect()
}

/// Sets the file's modification time an hour back, to tell a rewrite.
fn age(path: &Path) -> SystemTime {
    let old = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options().write(true).open(path).expect("open").set_modified(old).expect("set mtime");
    std::fs::metadata(path).expect("metadata").modified().expect("mtime")
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).expect("metadata").modified().expect("mtime")
}

/// The file's inode: a file written again (to a temporary file renamed into place) has
/// another.
fn inode(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).expect("metadata"))
}

#[test]
fn compiled_modules_are_cached_on_disk_and_loaded_from_there() {
    let cache = tempfile::tempdir().expect("temp dir");
    let first = load(cache.path(), "noop");
    let file = artifact_of(cache.path(), &first);
    assert_eq!(artifacts(cache.path()), std::slice::from_ref(&file));
    let name = file.file_name().expect("name").to_string_lossy().into_owned();
    assert!(name.starts_with(&format!("{}-", first.sha256)) && name.ends_with(".cwasm"), "{name}");
    let (aged, written) = (age(&file), inode(&file));
    let again = load(cache.path(), "noop");
    assert_eq!(again.sha256, first.sha256);
    // A write replaces the file (a new one renamed into its place); a load marks it used.
    assert_eq!(inode(&file), written, "loaded from the cache, not compiled and written again");
    assert!(modified(&file) > aged, "the load marks the file used (the cache removes the least used first)");
    assert_eq!(declared_state(&again), Vec::<String>::new());
}

#[test]
fn a_swapped_damaged_or_headerless_cache_file_is_not_loaded() {
    let cache = tempfile::tempdir().expect("temp dir");
    let noop = load(cache.path(), "noop");
    let counting = load(cache.path(), "running_count");
    let noop_file = artifact_of(cache.path(), &noop);
    let counting_file = artifact_of(cache.path(), &counting);
    assert_eq!(declared_state(&counting), ["totals"]);
    let noop_bytes = std::fs::read(&noop_file).expect("artifact");
    let counting_bytes = std::fs::read(&counting_file).expect("artifact");
    // eddy's header: magic, the module's SHA-256, the engine's digest, the MAC.
    let header = 8 + 3 * 32;
    let module_of = |bytes: &[u8]| bytes[8..40].iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(module_of(&noop_bytes), noop.sha256);

    let mut damaged = noop_bytes.clone();
    let middle = header + (damaged.len() - header) / 2;
    damaged[middle] ^= 0x01;
    let mut forged = counting_bytes.clone();
    forged[8..40].copy_from_slice(&noop_bytes[8..40]);
    let cases = [
        ("running_count's file under noop's name", counting_bytes.clone()),
        ("running_count's file claiming to be noop's", forged),
        ("one bit of the artifact flipped", damaged),
        ("the bare artifact, as an older eddy wrote it", noop_bytes[header..].to_vec()),
        ("a truncated file", noop_bytes[..50].to_vec()),
    ];
    for (case, bytes) in cases {
        std::fs::write(&noop_file, &bytes).expect("planted");
        let aged = age(&noop_file);
        let loaded = load(cache.path(), "noop");
        assert_eq!(declared_state(&loaded), Vec::<String>::new(), "{case}: the code loaded is noop's");
        assert_ne!(modified(&noop_file), aged, "{case}: compiled again and rewritten");
        let rewritten = std::fs::read(&noop_file).expect("artifact");
        assert_eq!(module_of(&rewritten), noop.sha256, "{case}");
        assert_ne!(rewritten, bytes, "{case}");
    }
    // running_count's own file was never touched.
    assert_eq!(std::fs::read(&counting_file).expect("artifact"), counting_bytes);
}

#[test]
fn eddy_compile_fills_the_cache_ahead_of_the_first_run() {
    let cache = tempfile::tempdir().expect("temp dir");
    let compile = || {
        std::process::Command::new(eddy_tests::eddy_bin())
            .args(["compile", wasm("noop").to_str().expect("path")])
            .env("EDDY_CACHE_DIR", cache.path())
            .output()
            .expect("eddy compile runs")
    };
    let first = compile();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.starts_with("noop.wasm: ready in ") && stdout.contains("cached in"), "{stdout}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("compiling module 'noop.wasm'") && stderr.contains("compiled module 'noop.wasm' in"),
        "{stderr}"
    );
    assert_eq!(artifacts(cache.path()).len(), 1, "one compiled module cached");
    let again = compile();
    assert!(again.status.success());
    assert!(!String::from_utf8_lossy(&again.stderr).contains("compiling module"), "the second load is from the cache");
    let missing = std::process::Command::new(eddy_tests::eddy_bin())
        .args(["compile", "no-such.wasm"])
        .env("EDDY_CACHE_DIR", cache.path())
        .output()
        .expect("eddy compile runs");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read processor module no-such.wasm"));
}
