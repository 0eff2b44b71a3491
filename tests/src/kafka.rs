//! A real Kafka-protocol broker for the Kafka tests: `nisshi` (installed by
//! `scripts/install-kafka-broker.sh`, found through `$EDDY_KAFKA_BROKER` or the
//! script's default directory) on 127.0.0.1 and a free port, storing in SQLite in a
//! temporary directory; stopped when dropped. Topics are made and read with
//! `eddy kafka`, the same tools users have.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::eddy_bin;

/// A running broker.
pub struct Broker {
    binary: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

/// The broker binary: `$EDDY_KAFKA_BROKER`, or where the install script puts it.
pub fn broker_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("EDDY_KAFKA_BROKER") {
        return PathBuf::from(path);
    }
    let cache = std::env::var_os("EDDY_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
        home.join("eddy-tools")
    });
    let binary = cache.join("nisshi-0.7.0/bin/nisshi");
    assert!(binary.is_file(), "{} is missing: run scripts/install-kafka-broker.sh (make test does)", binary.display());
    binary
}

impl Broker {
    /// Starts a broker with empty storage.
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let mut broker =
            Broker { binary: broker_binary(), dir: tempfile::tempdir().expect("temp dir"), port, child: None };
        broker.launch();
        broker
    }

    fn launch(&mut self) {
        let url = format!("tcp://127.0.0.1:{}", self.port);
        // nisshi opens a SQLite path relative to its working directory.
        let storage = "sqlite://broker.db".to_string();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("broker.log"))
            .expect("broker log");
        let child = Command::new(&self.binary)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url, "--storage-engine", &storage])
            .current_dir(self.dir.path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the broker starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "the broker did not listen within 30 s: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// `host:port` for clients.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the broker (SIGKILL) and starts it again on the same port and storage.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Runs `eddy kafka <args>` against this broker; panics with its stderr on failure.
    pub fn eddy_kafka(&self, args: &[&str], stdin: Option<&Path>) -> String {
        let mut command = Command::new(eddy_bin());
        command.arg("kafka").args(args).args(["--bootstrap-servers", &self.bootstrap()]);
        if let Some(file) = stdin {
            command.stdin(std::fs::File::open(file).expect("input file"));
        }
        let output = command.output().expect("eddy kafka runs");
        assert!(
            output.status.success(),
            "eddy kafka {args:?} failed: {}\nbroker log:\n{}",
            String::from_utf8_lossy(&output.stderr),
            self.log()
        );
        String::from_utf8(output.stdout).expect("UTF-8 output")
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.eddy_kafka(&["create-topic", topic, "--partitions", &partitions.to_string()], None);
    }

    /// Writes `lines` (JSON) into `topic`, keyed by `key_field` when given.
    pub fn produce(&self, topic: &str, lines: &[String], key_field: Option<&str>) {
        let file = self.dir.path().join(format!("produce-{}.jsonl", std::process::id()));
        std::fs::write(&file, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("input file");
        let mut args = vec!["produce", topic, file.to_str().expect("path")];
        if let Some(field) = key_field {
            args.extend(["--key-field", field]);
        }
        self.eddy_kafka(&args, None);
    }

    /// Every record of `topic` with its metadata (`partition`, `offset`, `key`,
    /// `headers`, `value`), partition by partition in offset order.
    pub fn records(&self, topic: &str) -> Vec<serde_json::Value> {
        let text = self.eddy_kafka(&["consume", topic, "--metadata", "--isolation", "read_uncommitted"], None);
        text.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
    }
}

/// A re-run of a batch by the Kafka sink, as its log line (`sink: batch N runs again: W
/// of its T records were already written, …`) tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rerun {
    /// The batch.
    pub batch: u64,
    /// How many of its records the crashed run had written.
    pub already_written: u64,
}

/// The Kafka sink's re-runs logged in `stderr` (at level info).
pub fn reruns(stderr: &[u8]) -> Vec<Rerun> {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" runs again: ")?;
            let batch = before.rsplit(' ').next()?.parse().ok()?;
            let already_written = after.split(' ').next()?.parse().ok()?;
            Some(Rerun { batch, already_written })
        })
        .collect()
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}
