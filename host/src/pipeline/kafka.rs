//! Kafka in the pipeline spec: what a Kafka source reads (topics, where to start, how
//! much per batch), where a Kafka sink writes (topic, key), and the client properties
//! both pass to librdkafka, with credentials given by reference (`${env:NAME}`,
//! `${file:PATH}`) and never shown.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};

/// The default of `max-offsets-per-trigger`: a batch reads at most this many offsets
/// across all partitions, so a large backlog is read in bounded batches.
pub const DEFAULT_MAX_OFFSETS_PER_TRIGGER: u64 = 1_000_000;

/// The default of `max-bytes-per-trigger` for Kafka sources: a batch holds at most
/// this many bytes of records (and always at least one record).
pub const DEFAULT_KAFKA_MAX_BYTES_PER_TRIGGER: u64 = 32 << 20;

/// The default of a Kafka sink's `transaction-wait`.
pub const DEFAULT_TRANSACTION_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// The Kafka metadata a source's schema may name as columns.
pub const METADATA_COLUMNS: [&str; 6] = ["key", "topic", "partition", "offset", "timestamp", "headers"];

/// What a Kafka source reads.
#[derive(Clone, Debug)]
pub struct KafkaSourceSpec {
    /// The topics, or the pattern topics are matched against.
    pub subscription: Subscription,
    /// Where partitions without a committed position start.
    pub starting_offsets: StartingOffsets,
    /// At most this many offsets per batch, split across partitions in proportion to
    /// their backlog (`None`: everything available).
    pub max_offsets_per_trigger: Option<u64>,
    /// At most this many bytes of records (keys, values and headers) per batch, and
    /// always at least one record (`None`: no byte limit).
    pub max_bytes_per_trigger: Option<u64>,
    /// Whether offsets deleted before they were read stop the query (`true`) or are
    /// skipped and counted.
    pub fail_on_data_loss: bool,
    /// Which schema columns are filled from the record's metadata instead of its value
    /// (by default every column named like one of [`METADATA_COLUMNS`]).
    pub metadata_columns: Vec<String>,
    /// The librdkafka properties (`[source.kafka]`).
    pub properties: KafkaProperties,
}

/// The topics a source reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subscription {
    /// These topics.
    Topics(Vec<String>),
    /// Every topic whose whole name matches this regular expression, new ones included.
    Pattern(String),
}

impl fmt::Display for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subscription::Topics(topics) => write!(f, "{}", topics.join(",")),
            Subscription::Pattern(pattern) => write!(f, "pattern {pattern}"),
        }
    }
}

/// Where a partition without a committed position starts (Spark's `startingOffsets`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartingOffsets {
    /// At the oldest record still kept.
    Earliest,
    /// At the end: only records produced after the query started.
    Latest,
    /// Per topic and partition: an offset, or -2 (earliest) / -1 (latest); partitions
    /// not named start at the earliest offset.
    Specific(BTreeMap<String, BTreeMap<i32, i64>>),
}

impl StartingOffsets {
    /// Parses `"earliest"`, `"latest"` or Spark's JSON `{"topic":{"0":23,"1":-2}}`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "earliest" => return Ok(Self::Earliest),
            "latest" => return Ok(Self::Latest),
            _ => {}
        }
        let expected =
            "expected \"earliest\", \"latest\" or JSON like {\"topic\":{\"0\":23,\"1\":-2}} (-2: earliest, -1: latest)";
        let parsed: BTreeMap<String, BTreeMap<String, i64>> =
            serde_json::from_str(text).map_err(|error| format!("'{text}' is not valid: {error}; {expected}"))?;
        let mut offsets = BTreeMap::new();
        for (topic, partitions) in parsed {
            let mut by_partition = BTreeMap::new();
            for (partition, offset) in partitions {
                let number: i32 =
                    partition.parse().ok().filter(|p: &i32| *p >= 0).ok_or_else(|| {
                        format!("topic '{topic}': '{partition}' is not a partition number; {expected}")
                    })?;
                if offset < -2 {
                    return Err(format!("topic '{topic}' partition {number}: offset {offset}; {expected}"));
                }
                by_partition.insert(number, offset);
            }
            offsets.insert(topic, by_partition);
        }
        Ok(Self::Specific(offsets))
    }
}

/// Where a Kafka sink writes.
#[derive(Clone, Debug)]
pub struct KafkaSinkSpec {
    /// The topic every row goes to, unless `topic_column` names one per row.
    pub topic: Option<String>,
    /// A STRING output column naming each row's topic.
    pub topic_column: Option<String>,
    /// An output column whose value (as text) is the record key; `None`: null keys.
    pub key_column: Option<String>,
    /// Whether each batch is one Kafka transaction (read_committed consumers see a
    /// batch all at once); the header-based exactly-once holds either way.
    pub transactional: bool,
    /// How long a batch written in a transaction and run again after a crash waits for
    /// other producers' open transactions on its partitions to end (it must read its
    /// committed records, which lie past their last stable offset).
    pub transaction_wait: std::time::Duration,
    /// The librdkafka properties (`[sink.kafka]`).
    pub properties: KafkaProperties,
}

/// librdkafka properties, in key order. Values may be references, resolved only when
/// a client is made; `Debug` shows no value of a sensitive or referenced property.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaProperties {
    entries: BTreeMap<String, PropertyValue>,
}

/// One property's value as the spec gives it (`Debug` never shows a plain value).
#[derive(Clone, PartialEq, Eq)]
pub enum PropertyValue {
    /// The value itself.
    Plain(String),
    /// `${env:NAME}`: the environment variable's value.
    Env(String),
    /// `${file:PATH}`: the file's contents (without a trailing newline).
    File(PathBuf),
}

impl fmt::Debug for PropertyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropertyValue::Plain(_) => f.write_str("Plain(…)"),
            PropertyValue::Env(name) => write!(f, "Env({name})"),
            PropertyValue::File(path) => write!(f, "File({})", path.display()),
        }
    }
}

/// A property resolved for librdkafka: its key, its value and whether the value must
/// never be shown.
#[derive(Clone)]
pub struct ResolvedProperty {
    /// The librdkafka key.
    pub key: String,
    /// The value.
    pub value: String,
    /// A credential (given by reference, or under a sensitive key).
    pub secret: bool,
}

impl KafkaProperties {
    /// The properties of a `[source.kafka]` / `[sink.kafka]` table; `base` resolves
    /// relative `${file:…}` paths. Errors name the key.
    pub fn from_table(table: &toml::Table, base: &std::path::Path) -> Result<Self, String> {
        let mut entries = BTreeMap::new();
        for (key, value) in table {
            let text = match value {
                toml::Value::String(text) => text.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                toml::Value::Float(x) => x.to_string(),
                _ => return Err(format!("'{key}': expected a string, number or boolean")),
            };
            let value = match text.strip_prefix("${").and_then(|rest| rest.strip_suffix('}')) {
                Some(reference) => match reference.split_once(':') {
                    Some(("env", name)) if !name.is_empty() => PropertyValue::Env(name.to_string()),
                    Some(("file", path)) if !path.is_empty() => PropertyValue::File(base.join(path)),
                    _ => {
                        return Err(format!(
                            "'{key}': unknown reference; expected \"${{env:NAME}}\" or \"${{file:PATH}}\""
                        ));
                    }
                },
                None => PropertyValue::Plain(text),
            };
            entries.insert(key.clone(), value);
        }
        Ok(Self { entries })
    }

    /// A plain (not referenced) property's value.
    pub fn plain(&self, key: &str) -> Option<&str> {
        match self.entries.get(key) {
            Some(PropertyValue::Plain(value)) => Some(value),
            _ => None,
        }
    }

    /// Whether `key` is set.
    pub fn has(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Every property with its value read (environment variables, files). Errors name
    /// the property and the variable or file, never a value.
    pub fn resolve(&self) -> Result<Vec<ResolvedProperty>> {
        let mut resolved = Vec::with_capacity(self.entries.len());
        for (key, value) in &self.entries {
            let (value, referenced) = match value {
                PropertyValue::Plain(value) => (value.clone(), false),
                PropertyValue::Env(name) => {
                    let value = std::env::var(name).map_err(|_| {
                        anyhow!("Kafka property '{key}' refers to the environment variable {name}, which is not set")
                    })?;
                    (value, true)
                }
                PropertyValue::File(path) => {
                    let text = std::fs::read_to_string(path).with_context(|| {
                        format!("Kafka property '{key}' refers to the file {}, which cannot be read", path.display())
                    })?;
                    (text.trim_end_matches(['\n', '\r']).to_string(), true)
                }
            };
            resolved.push(ResolvedProperty { key: key.clone(), secret: referenced || is_sensitive(key), value });
        }
        Ok(resolved)
    }
}

impl fmt::Debug for ResolvedProperty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = if self.secret { "(hidden)" } else { self.value.as_str() };
        write!(f, "{}={value}", self.key)
    }
}

impl fmt::Debug for KafkaProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (key, value) in &self.entries {
            match value {
                PropertyValue::Plain(text) if !is_sensitive(key) => map.entry(key, text),
                PropertyValue::Env(name) => map.entry(key, &format!("${{env:{name}}}")),
                PropertyValue::File(_) => map.entry(key, &"${file:…}"),
                PropertyValue::Plain(_) => map.entry(key, &"(hidden)"),
            };
        }
        map.finish()
    }
}

/// Properties that eddy sets itself and a spec must leave out.
pub(super) fn check_properties(properties: &KafkaProperties, owned: &[&str]) -> Result<(), String> {
    if !properties.has("bootstrap.servers") {
        return Err("\"bootstrap.servers\" is missing; set it to the brokers' host:port list".into());
    }
    match owned.iter().find(|key| properties.has(key)) {
        Some(key) => Err(format!("'{key}' is set by eddy (it keeps exactly-once); leave it out")),
        None => Ok(()),
    }
}

/// Whether a librdkafka property holds a credential (passwords, keys, secrets, tokens).
pub fn is_sensitive(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "secret", "token", "jaas", "key.pem", "private"].iter().any(|word| key.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starting_offsets_follow_sparks_forms() {
        assert_eq!(StartingOffsets::parse("earliest"), Ok(StartingOffsets::Earliest));
        assert_eq!(StartingOffsets::parse("latest"), Ok(StartingOffsets::Latest));
        let specific = StartingOffsets::parse(r#"{"t":{"0":23,"1":-2}}"#).expect("valid");
        let expected = BTreeMap::from([("t".to_string(), BTreeMap::from([(0, 23), (1, -2)]))]);
        assert_eq!(specific, StartingOffsets::Specific(expected));
        assert!(StartingOffsets::parse(r#"{"t":{"x":1}}"#).expect_err("bad").contains("not a partition number"));
        assert!(StartingOffsets::parse(r#"{"t":{"0":-3}}"#).expect_err("bad").contains("offset -3"));
        assert!(StartingOffsets::parse("first").expect_err("bad").contains("expected \"earliest\""));
    }

    #[test]
    fn references_resolve_and_never_show() -> Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("pw"), "from-a-file\n")?;
        let table: toml::Table = toml::from_str(
            r#"
            "bootstrap.servers" = "127.0.0.1:9092"
            "sasl.password" = "${env:EDDY_TEST_KAFKA_SECRET_1}"
            "sasl.username" = "${file:pw}"
            "ssl.key.password" = "inline-secret"
            "linger.ms" = 5
            "#,
        )?;
        let properties = KafkaProperties::from_table(&table, dir.path()).map_err(|e| anyhow!(e))?;
        let shown = format!("{properties:?}");
        assert!(!shown.contains("inline-secret") && !shown.contains("from-a-file"), "{shown}");
        assert!(shown.contains("127.0.0.1:9092"), "{shown}");
        let missing = properties.resolve().expect_err("variable not set").to_string();
        assert!(missing.contains("EDDY_TEST_KAFKA_SECRET_1") && missing.contains("sasl.password"), "{missing}");
        // SAFETY: only this test reads or writes this variable.
        unsafe { std::env::set_var("EDDY_TEST_KAFKA_SECRET_1", "s3cret") };
        let resolved = properties.resolve()?;
        let find = |key: &str| resolved.iter().find(|p| p.key == key).map(|p| (p.value.clone(), p.secret));
        assert_eq!(find("sasl.password"), Some(("s3cret".into(), true)));
        assert_eq!(find("sasl.username"), Some(("from-a-file".into(), true)));
        assert_eq!(find("ssl.key.password"), Some(("inline-secret".into(), true)));
        assert_eq!(find("linger.ms"), Some(("5".into(), false)));
        let bad: toml::Table = toml::from_str(r#""sasl.password" = "${vault:x}""#)?;
        assert!(KafkaProperties::from_table(&bad, dir.path()).expect_err("unknown").contains("unknown reference"));
        Ok(())
    }
}
