//! Watching a real query: `eddy run --metrics` serves Prometheus metrics whose counters
//! equal the progress records' and the input's, and a dashboard that a real browser
//! (headless Chromium) renders with the same numbers; a skewed key leads the hot keys
//! (its markup shown as text);
//! `eddy ui` serves the same page from the checkpoint after the query stopped.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eddy_tests::{eddy_bin, repo_root};
use serde_json::Value;

/// Rows per input file, and the share of them that belong to the hot user.
const ROWS_PER_FILE: usize = 1_000;
/// The hot user's name: markup, which the page must show as text.
const HOT: &str = "hot<img src=x onerror=alert(1)>";
const FILES: usize = 3;

/// Writes the input: each file has 30 % of its rows for `hot`, the rest spread over
/// 200 other users. Returns the rows per user and the input's bytes.
fn write_input(input: &Path) -> (BTreeMap<String, u64>, u64) {
    std::fs::create_dir_all(input).expect("input dir");
    let mut per_user = BTreeMap::new();
    let mut bytes = 0;
    for file in 0..FILES {
        let mut text = String::new();
        for row in 0..ROWS_PER_FILE {
            let user = if row % 10 < 3 { HOT.to_string() } else { format!("user-{:03}", (row * 7 + file) % 200) };
            text.push_str(&format!("{{\"user\":\"{user}\",\"amount\":{}}}\n", row % 17));
            *per_user.entry(user).or_insert(0) += 1;
        }
        bytes += text.len() as u64;
        std::fs::write(input.join(format!("{file:03}.jsonl")), text).expect("input file");
    }
    (per_user, bytes)
}

fn free_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("address").to_string()
}

/// GET `path` from `address`; returns the status code and the body.
fn get(address: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("connects");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).expect("a status code");
    (status, body.to_string())
}

/// Waits until `check` holds, at most a minute.
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < Duration::from_secs(60), "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of the sample `name{labels}` in an OpenMetrics text.
fn sample(metrics: &str, name_and_labels: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name_and_labels)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {name_and_labels} in:\n{metrics}"))
}

/// The page as headless Chromium renders it (scripts run), and a screenshot of it.
fn render_in_chromium(url: &str, screenshot: &Path) -> String {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|path| Path::new(path).exists())
        .expect("Chromium is missing: `make test` installs Debian's chromium package (scripts/install-deps.sh)");
    let profile = tempfile::tempdir().expect("profile dir");
    let run = |mode: &[String]| {
        let output = Command::new(chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(["--virtual-time-budget=5000", "--window-size=1400,1100"])
            .args(mode)
            .arg(url)
            .stderr(Stdio::null())
            .output()
            .expect("chromium runs");
        assert!(output.status.success(), "chromium failed on {url}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    run(&[format!("--screenshot={}", screenshot.display())]);
    assert!(std::fs::metadata(screenshot).map(|m| m.len() > 10_000).unwrap_or(false), "a screenshot was taken");
    run(&["--dump-dom".to_string()])
}

/// The text of the element with `id` in `dom`.
fn text_of(dom: &str, id: &str) -> String {
    let start = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in the page"));
    let after = &dom[start..];
    let open = after.find('>').expect("tag end") + 1;
    let close = after[open..].find('<').expect("element end");
    after[open..open + close].to_string()
}

/// The `data-field` cells of the batches table, per batch id.
fn table_cell(dom: &str, batch: u64, field: &str) -> String {
    let row = dom.find(&format!("<tr data-batch=\"{batch}\">")).unwrap_or_else(|| panic!("no row of batch {batch}"));
    let cell = dom[row..].find(&format!("data-field=\"{field}\">")).expect("cell") + row;
    let value = &dom[cell..][format!("data-field=\"{field}\">").len()..];
    value[..value.find('<').expect("cell end")].to_string()
}

/// The progress records and the metrics of the same committed batches: the batch
/// whose commit file the test saw may not be in the monitor yet, and a batch may
/// commit between the two requests, so both are read until the records before and
/// after the metrics agree with them (at least three batches).
fn consistent_snapshot(address: &str) -> (Vec<Value>, String) {
    let progress = || -> Vec<Value> {
        serde_json::from_str(&get(address, "/api/progress?last=100").1).expect("progress records are JSON")
    };
    let mut snapshot = None;
    wait_until("progress records and metrics of the same three or more batches", || {
        let before = progress();
        let metrics = get(address, "/metrics").1;
        let after = progress();
        let batches = sample(&metrics, "eddy_batches_total{query=\"watched\"}");
        let agree = before.len() >= 3 && before.len() == after.len() && before.len() as f64 == batches;
        if agree {
            snapshot = Some((after, metrics));
        }
        agree
    });
    snapshot.expect("a snapshot was taken")
}

fn start_query(dir: &Path, address: &str) -> Child {
    let wasm = repo_root().join("build/wasm/running_count.wasm");
    let spec = format!(
        "name = \"watched\"\n\n[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
         schema = \"user STRING, amount BIGINT\"\n\n\
         [operator]\nmodule = {wasm:?}\nkey = [\"user\"]\noutput-mode = \"update\"\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\nprocessing-time = \"200 ms\"\n"
    );
    std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
    Command::new(eddy_bin())
        .args(["run", "pipeline.toml", "--checkpoint", "checkpoint", "--metrics", address])
        .current_dir(dir)
        .env("EDDY_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("eddy starts")
}

fn screenshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

#[test]
fn metrics_and_the_dashboard_show_what_the_progress_records_say() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (per_user, input_bytes) = write_input(&dir.path().join("input"));
    let address = free_address();
    let mut query = start_query(dir.path(), &address);
    wait_until("three committed batches", || dir.path().join("checkpoint/commits/2").exists());
    wait_until("readiness", || get(&address, "/readyz").0 == 200);
    assert_eq!(get(&address, "/healthz"), (200, "ok\n".to_string()));

    let (records, metrics) = consistent_snapshot(&address);
    let total = |field: &dyn Fn(&Value) -> u64| records.iter().map(field).sum::<u64>();
    let label = "{query=\"watched\"";
    assert_eq!(records.len() as f64, sample(&metrics, &format!("eddy_batches_total{label}}}")));
    let input_rows = total(&|r| r["numInputRows"].as_u64().unwrap_or(0));
    assert_eq!(input_rows, (ROWS_PER_FILE * FILES) as u64, "every input row, once");
    assert_eq!(input_rows as f64, sample(&metrics, &format!("eddy_input_rows_total{label},source=\"source-0\"}}")));
    assert_eq!(input_bytes as f64, sample(&metrics, &format!("eddy_input_bytes_total{label},source=\"source-0\"}}")));
    let output_rows = total(&|r| r["sink"]["numOutputRows"].as_u64().unwrap_or(0));
    assert_eq!(output_rows as f64, sample(&metrics, &format!("eddy_output_rows_total{label}}}")));
    let stage = ",stage=\"transformWithState\"";
    let calls =
        total(&|r| r["stateOperators"][0]["customMetrics"]["guestCalls[handle-input-rows]"].as_u64().unwrap_or(0));
    assert_eq!(
        calls as f64,
        sample(&metrics, &format!("eddy_guest_calls_total{label}{stage},handler=\"handle-input-rows\"}}"))
    );
    let keys = total(&|r| r["stateOperators"][0]["customMetrics"]["numKeysWithInput"].as_u64().unwrap_or(0));
    assert_eq!(keys, calls, "one call per key with input");
    assert_eq!(
        records.len() as f64,
        sample(&metrics, &format!("eddy_batch_duration_seconds_count{label}}}")),
        "every batch in the duration histogram"
    );

    // The hot user (30 % of every batch) leads each batch's hot keys.
    for record in records.iter().filter(|r| r["numInputRows"].as_u64() > Some(0)) {
        let first = &record["topKeys"]["byRows"][0];
        assert_eq!(first["key"], format!("[\"{HOT}\"]"), "batch {}", record["batchId"]);
        assert_eq!(first["rows"].as_u64(), Some((ROWS_PER_FILE * 3 / 10) as u64));
    }
    assert_eq!(per_user[HOT], (ROWS_PER_FILE * FILES * 3 / 10) as u64);

    let dom = render_in_chromium(&format!("http://{address}/"), &screenshot_path("dashboard-live.png"));
    let last = records.last().expect("records");
    let last_id = last["batchId"].as_u64().expect("batch id");
    let rendered: u64 = dom
        .split("data-rendered=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|id| id.parse().ok())
        .expect("the page rendered a batch");
    assert!(rendered >= last_id, "the page shows batch {rendered}, the records end at {last_id}");
    for batch in 0..3u64 {
        let record = records.iter().find(|r| r["batchId"] == batch).expect("record");
        assert_eq!(table_cell(&dom, batch, "numInputRows"), record["numInputRows"].to_string(), "batch {batch}");
        assert_eq!(table_cell(&dom, batch, "numOutputRows"), record["sink"]["numOutputRows"].to_string());
    }
    // The key is on the page as text: its markup escaped, no element made of it.
    let shown = "<td data-field=\"key\">[\"hot&lt;img src=x onerror=alert(1)&gt;\"]</td>";
    assert!(dom.contains(shown), "the hot key is on the page, escaped");
    assert!(!dom.contains("<img"), "no markup from the data");
    assert!(dom.matches("<rect ").count() >= 3 * 2, "the phase chart has bars");

    // Stopped, its dashboard is served from the checkpoint with the same numbers.
    let kill = Command::new("kill").args(["-TERM", &query.id().to_string()]).status().expect("kill");
    assert!(kill.success());
    assert!(query.wait().expect("eddy stops").success(), "a graceful stop");
    // A checkpoint's records are shown as text too: the first record's time, stage
    // name and watermark rewritten to markup.
    let first_record = dir.path().join("checkpoint/progress/0.json");
    let mut record: Value =
        serde_json::from_str(&std::fs::read_to_string(&first_record).expect("record")).expect("json");
    record["timestamp"] = "<b id=\"from-timestamp\">t</b>".into();
    record["stateOperators"][0]["operatorName"] = "<b id=\"from-stage\">s</b>".into();
    record["eventTime"]["watermark"] = "<b id=\"from-watermark\">w</b>".into();
    std::fs::write(&first_record, serde_json::to_string_pretty(&record).expect("json")).expect("rewritten");
    let ui_address = free_address();
    let mut ui = Command::new(eddy_bin())
        .args(["ui", "checkpoint", "--address", &ui_address])
        .current_dir(dir.path())
        .env("EDDY_LOG", "warn")
        .spawn()
        .expect("eddy ui starts");
    wait_until("eddy ui", || TcpStream::connect(&ui_address).is_ok());
    let stored: Vec<Value> = serde_json::from_str(&get(&ui_address, "/api/progress?last=100").1).expect("records");
    let dom = render_in_chromium(&format!("http://{ui_address}/"), &screenshot_path("dashboard-ui.png"));
    let last = stored.last().expect("records");
    assert_eq!(text_of(&dom, "latest-batch-id"), last["batchId"].to_string());
    for field in ["timestamp", "stage", "watermark"] {
        assert!(!dom.contains(&format!("<b id=\"from-{field}\">")), "the record's {field} made markup");
        assert!(dom.contains(&format!("&lt;b id=\"from-{field}\"&gt;")), "the record's {field} is shown as text");
    }
    assert_eq!(text_of(&dom, "latest-input-rows"), last["numInputRows"].to_string());
    assert_eq!(get(&ui_address, "/metrics").0, 404, "no live metrics for a checkpoint");
    let _ = ui.kill();
    let _ = ui.wait();
}
