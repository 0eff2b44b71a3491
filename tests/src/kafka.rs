//! A real Kafka-protocol broker for the Kafka tests: `nisshi` (installed by
//! `scripts/install-kafka-broker.sh`, found through `$EDDY_KAFKA_BROKER` or the
//! script's default directory) on 127.0.0.1 and a free port, storing in SQLite in a
//! temporary directory; stopped when dropped. Topics are made and read with
//! `eddy kafka`, the same tools users have; what those tools cannot make — a header
//! key that is not UTF-8, another producer's open transaction — with librdkafka.

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

impl Broker {
    fn client(&self) -> rdkafka::ClientConfig {
        let mut config = rdkafka::ClientConfig::new();
        config.set("bootstrap.servers", self.bootstrap());
        config
    }

    /// Writes one record with `value` to `topic` `partition`, with the raw bytes `key`
    /// as its key and a header (value `raw`) whose key is the raw bytes `header_key`
    /// (any bytes but NUL: Kafka does not require UTF-8, and rdkafka's own API takes
    /// only text for header keys, so this goes through `rd_kafka_produceva`).
    pub fn produce_raw(&self, topic: &str, partition: i32, key: Option<&[u8]>, header_key: Option<&[u8]>, value: &str) {
        use rdkafka::bindings as rdsys;
        use rdkafka::producer::{BaseProducer, Producer};
        let producer: BaseProducer = self.client().create().expect("a producer");
        let topic_c = std::ffi::CString::new(topic).expect("topic");
        let header_c = header_key.map(|key| std::ffi::CString::new(key).expect("a header key without NUL"));
        let header_value = b"raw";
        let memory = |bytes: &[u8]| rdsys::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 {
            ptr: bytes.as_ptr() as *mut std::os::raw::c_void,
            size: bytes.len(),
        };
        // SAFETY: an all-zero item is RD_KAFKA_VTYPE_END with a null pointer.
        let mut items: Vec<rdsys::rd_kafka_vu_t> = vec![unsafe { std::mem::zeroed() }; 5];
        items[0].vtype = rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_TOPIC;
        items[0].u.cstr = topic_c.as_ptr();
        items[1].vtype = rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION;
        items[1].u.i32_ = partition;
        items[2].vtype = rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE;
        items[2].u.mem = memory(value.as_bytes());
        let mut count = 3;
        if let Some(key) = key {
            items[count].vtype = rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_KEY;
            items[count].u.mem = memory(key);
            count += 1;
        }
        if let Some(name) = &header_c {
            items[count].vtype = rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_HEADER;
            items[count].u.header = rdsys::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_2 {
                name: name.as_ptr(),
                val: header_value.as_ptr().cast(),
                size: header_value.len() as isize,
            };
            count += 1;
        }
        // SAFETY: the items point at locals that outlive the call; librdkafka copies
        // the value, key and header (no RD_KAFKA_MSG_F_FREE).
        let error = unsafe { rdsys::rd_kafka_produceva(producer.client().native_ptr(), items.as_ptr(), count) };
        assert!(error.is_null(), "rd_kafka_produceva failed");
        producer.flush(Duration::from_secs(30)).expect("the record is delivered");
    }

    /// Opens a transaction of another producer that writes `value` to `topic`
    /// `partition` and stays open until the returned transaction is ended.
    pub fn open_transaction(&self, topic: &str, partition: i32, value: &str) -> OpenTransaction {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let producer: BaseProducer = self
            .client()
            .set("transactional.id", format!("other-producer-{topic}-{partition}"))
            .set("transaction.timeout.ms", "600000")
            .create()
            .expect("a transactional producer");
        producer.init_transactions(Duration::from_secs(30)).expect("transactions start");
        producer.begin_transaction().expect("a transaction begins");
        producer
            .send(BaseRecord::<(), str>::to(topic).partition(partition).payload(value))
            .map_err(|(error, _)| error)
            .expect("a record is sent");
        producer.flush(Duration::from_secs(30)).expect("the record is delivered");
        OpenTransaction { producer }
    }

    /// The last stable offset and the end of `topic` `partition` (what read_committed
    /// and read_uncommitted consumers see as the end).
    pub fn stable_and_end(&self, topic: &str, partition: i32) -> (i64, i64) {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let end_of = |isolation: &str| {
            let consumer: BaseConsumer =
                self.client().set("group.id", "test").set("isolation.level", isolation).create().expect("a consumer");
            consumer.fetch_watermarks(topic, partition, Duration::from_secs(30)).expect("watermarks").1
        };
        (end_of("read_committed"), end_of("read_uncommitted"))
    }
}

/// `count` purchase events (`user`, `amount`) over `users` users, seeded.
pub fn purchases(count: usize, users: u64, seed: u64) -> Vec<String> {
    let mut rng = crate::Rng(seed);
    (0..count)
        .map(|_| format!("{{\"user\":\"u-{:03}\",\"amount\":{}}}", rng.below(users), rng.below(100) + 1))
        .collect()
}

/// `eddy run SPEC --checkpoint CHECKPOINT`, to be given its environment and run.
pub fn eddy_run(spec: &Path, checkpoint: &Path) -> Command {
    let mut command = Command::new(eddy_bin());
    command.args(["run", spec.to_str().expect("path"), "--checkpoint", checkpoint.to_str().expect("path")]);
    command
}

/// Starts `eddy run DIR/pipeline.toml --checkpoint DIR/checkpoint --quiet`, logging at
/// info to a piped stderr, with a crash-test `pause` (variable, milliseconds) if given.
pub fn start_quiet(dir: &Path, pause: Option<(&str, &str)>) -> Child {
    let mut command = Command::new(eddy_bin());
    command
        .args([
            "run",
            dir.join("pipeline.toml").to_str().expect("path"),
            "--checkpoint",
            dir.join("checkpoint").to_str().expect("path"),
            "--quiet",
        ])
        .env("EDDY_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some((variable, ms)) = pause {
        command.env(variable, ms);
    }
    command.spawn().expect("eddy starts")
}

/// Asserts that a run succeeded; shows its errors and the broker's log otherwise.
pub fn assert_ok(output: &std::process::Output, broker: &Broker) {
    assert!(
        output.status.success(),
        "eddy failed: {}\nbroker log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        broker.log()
    );
}

/// The progress records of a checkpoint, in batch order (none before the first).
pub fn progress(checkpoint: &Path) -> Vec<serde_json::Value> {
    let Ok(entries) = std::fs::read_dir(checkpoint.join("progress")) else { return Vec::new() };
    let mut records: Vec<(u64, serde_json::Value)> = entries
        .flatten()
        .filter_map(|entry| {
            let id = entry.file_name().to_str()?.strip_suffix(".json")?.parse().ok()?;
            Some((id, serde_json::from_slice(&std::fs::read(entry.path()).ok()?).ok()?))
        })
        .collect();
    records.sort_by_key(|(id, _)| *id);
    records.into_iter().map(|(_, record)| record).collect()
}

/// Another producer's open transaction (see [`Broker::open_transaction`]).
pub struct OpenTransaction {
    producer: rdkafka::producer::BaseProducer,
}

impl OpenTransaction {
    /// Commits it.
    pub fn commit(self) {
        use rdkafka::producer::Producer;
        self.producer.commit_transaction(Duration::from_secs(30)).expect("the transaction commits");
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
