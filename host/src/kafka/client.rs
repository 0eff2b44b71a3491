//! Kafka clients made from a spec's properties: librdkafka configured with the
//! resolved properties, its log routed to eddy's, and every credential the
//! properties hold cut out of anything eddy prints or keeps.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, ProducerContext};

use crate::pipeline::KafkaProperties;

/// How long one metadata or offsets request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Removes credentials from text: each whole value and each of its parts (librdkafka
/// quotes pieces of values it cannot parse), longest first.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<Vec<String>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor of `values` and their parts of 6 characters or more.
    fn new(values: Vec<String>) -> Self {
        let mut secrets: Vec<String> = values.clone();
        for value in &values {
            let parts = value.split(|c: char| c.is_whitespace() || ",;=\"'".contains(c));
            secrets.extend(parts.filter(|part| part.len() >= 6).map(str::to_string));
        }
        secrets.retain(|secret| !secret.is_empty());
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        secrets.dedup();
        Self { secrets: Arc::new(secrets) }
    }

    /// `text` with every credential replaced by `***`.
    pub fn clean(&self, text: &str) -> String {
        let mut cleaned = text.to_string();
        for secret in self.secrets.iter() {
            cleaned = cleaned.replace(secret.as_str(), "***");
        }
        cleaned
    }

    /// A Kafka error as text without credentials, prefixed by what failed.
    pub fn error(&self, what: &str, error: &KafkaError) -> anyhow::Error {
        anyhow!("{what}: {}", self.clean(&error.to_string()))
    }
}

/// librdkafka's callbacks for eddy's clients: log lines and client errors go to
/// eddy's log (warnings and worse), without credentials; a producer's delivery
/// reports are counted.
#[derive(Clone, Debug)]
pub struct EddyContext {
    redactor: Redactor,
    /// Names the client in log lines, e.g. `source 'orders'`.
    label: String,
    deliveries: Arc<Mutex<Deliveries>>,
    /// Drop librdkafka's configuration warnings (a reader given a producer's properties).
    quiet_config: bool,
}

/// A producer's delivery reports so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deliveries {
    /// Records the brokers acknowledged.
    pub delivered: u64,
    /// Records that failed.
    pub failed: u64,
    /// The first failure's message (without credentials).
    pub first_error: Option<String>,
}

impl EddyContext {
    /// The delivery reports so far, and resets them.
    pub fn take_deliveries(&self) -> Deliveries {
        std::mem::take(&mut *self.deliveries.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl ProducerContext for EddyContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let mut deliveries = self.deliveries.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(_) => deliveries.delivered += 1,
            Err((error, _)) => {
                deliveries.failed += 1;
                if deliveries.first_error.is_none() {
                    deliveries.first_error = Some(self.redactor.clean(&error.to_string()));
                }
            }
        }
    }
}

impl ClientContext for EddyContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if self.quiet_config && fac == "CONFWARN" {
            return;
        }
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            crate::log::warn(&format!("{} (Kafka {fac}): {}", self.label, self.redactor.clean(log_message)));
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if matches!(error, KafkaError::PartitionEOF(_)) || reason.contains("reached end of partition") {
            return; // an end of partition is how reads finish, not an error
        }
        crate::log::warn(&format!(
            "{} (Kafka): {}: {}",
            self.label,
            self.redactor.clean(&error.to_string()),
            self.redactor.clean(reason)
        ));
    }
}

impl ConsumerContext for EddyContext {}

/// The resolved configuration of one client.
#[derive(Clone)]
pub struct ClientSettings {
    config: ClientConfig,
    redactor: Redactor,
    bootstrap: String,
    quiet_config: bool,
}

impl ClientSettings {
    /// Resolves `properties` (environment variables, files) into a librdkafka
    /// configuration; `defaults` are set first and may be overridden by the spec.
    pub fn new(properties: &KafkaProperties, defaults: &[(&str, &str)]) -> Result<Self> {
        let mut config = ClientConfig::new();
        config.set_log_level(RDKafkaLogLevel::Warning);
        for (key, value) in defaults {
            config.set(*key, *value);
        }
        let mut secrets = Vec::new();
        for property in properties.resolve()? {
            if property.secret {
                secrets.push(property.value.clone());
            }
            config.set(property.key, property.value);
        }
        let bootstrap = properties.plain("bootstrap.servers").unwrap_or("(referenced)").to_string();
        Ok(Self { config, redactor: Redactor::new(secrets), bootstrap, quiet_config: false })
    }

    /// Sets a property eddy owns.
    pub fn set(&mut self, key: &str, value: &str) -> &mut Self {
        self.config.set(key, value);
        self
    }

    /// Makes clients that do not warn about properties of another client type (the
    /// sink's reader shares the producer's properties).
    pub fn quiet_config_warnings(&mut self) -> &mut Self {
        self.quiet_config = true;
        self
    }

    /// The bootstrap servers as the spec gives them (for descriptions).
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// What removes this client's credentials from text.
    pub fn redactor(&self) -> Redactor {
        self.redactor.clone()
    }

    /// A client of type `C` labelled `label` in log lines.
    pub fn create<C>(&self, label: &str) -> Result<C>
    where
        C: rdkafka::config::FromClientConfigAndContext<EddyContext>,
    {
        let context = EddyContext {
            redactor: self.redactor.clone(),
            label: label.to_string(),
            deliveries: Arc::default(),
            quiet_config: self.quiet_config,
        };
        self.config
            .create_with_context(context)
            .map_err(|error| self.redactor.error(&format!("{label}: cannot create the Kafka client"), &error))
    }
}

/// What the cluster's metadata says of the topics a client wants.
#[derive(Debug, Default)]
pub struct TopicListing {
    /// Each available topic with its partition count, by name.
    pub topics: Vec<(String, i32)>,
    /// Topics that exist but cannot be used now (e.g. no leader yet), with the reason.
    pub unavailable: Vec<(String, String)>,
}

/// The partition count of every topic `wanted` accepts, from the cluster's metadata.
pub fn topic_partitions(
    consumer: &BaseConsumer<EddyContext>,
    redactor: &Redactor,
    wanted: impl Fn(&str) -> bool,
) -> Result<TopicListing> {
    use rdkafka::types::RDKafkaErrorCode;
    let metadata = consumer
        .fetch_metadata(None, REQUEST_TIMEOUT)
        .map_err(|error| redactor.error("cannot read the Kafka cluster's metadata", &error))?;
    let mut listing = TopicListing::default();
    for topic in metadata.topics() {
        if !wanted(topic.name()) {
            continue;
        }
        match topic.error().map(RDKafkaErrorCode::from) {
            None if !topic.partitions().is_empty() => {
                listing.topics.push((topic.name().to_string(), topic.partitions().len() as i32));
            }
            None | Some(RDKafkaErrorCode::UnknownTopicOrPartition) => {}
            Some(code) => listing.unavailable.push((topic.name().to_string(), redactor.clean(&code.to_string()))),
        }
    }
    listing.topics.sort();
    Ok(listing)
}

/// The low and high offsets of a partition (high: the last stable offset for a
/// read_committed client).
pub fn watermarks(
    consumer: &BaseConsumer<EddyContext>,
    redactor: &Redactor,
    topic: &str,
    partition: i32,
) -> Result<(i64, i64)> {
    consumer.fetch_watermarks(topic, partition, REQUEST_TIMEOUT).map_err(|error| {
        redactor.error(&format!("cannot read the offsets of topic '{topic}' partition {partition}"), &error)
    })
}

/// Creates `topic` with `partitions` partitions (used by `eddy kafka` and tests); an
/// existing topic is an error unless `exist_ok`.
pub fn create_topic(settings: &ClientSettings, topic: &str, partitions: i32, exist_ok: bool) -> Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<EddyContext> = settings.create("eddy kafka")?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().build().context("cannot start a runtime for the admin client")?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let results = runtime
        .block_on(admin.create_topics([&new_topic], &options))
        .map_err(|error| settings.redactor.error(&format!("cannot create topic '{topic}'"), &error))?;
    for result in results {
        match result {
            Ok(_) => {}
            Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) if exist_ok => {}
            Err((name, code)) => return Err(anyhow!("cannot create topic '{name}': {code}")),
        }
    }
    Ok(())
}

/// Deletes `topic` (used by `eddy kafka` and tests).
pub fn delete_topic(settings: &ClientSettings, topic: &str) -> Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions};
    let admin: AdminClient<EddyContext> = settings.create("eddy kafka")?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().build().context("cannot start a runtime for the admin client")?;
    let options = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let results = runtime
        .block_on(admin.delete_topics(&[topic], &options))
        .map_err(|error| settings.redactor.error(&format!("cannot delete topic '{topic}'"), &error))?;
    for result in results {
        if let Err((name, code)) = result {
            return Err(anyhow!("cannot delete topic '{name}': {code}"));
        }
    }
    Ok(())
}

/// Deletes the records of `topic` `partition` before `offset` (Kafka's DeleteRecords,
/// what retention does): for tests and tools.
pub fn delete_records_before(settings: &ClientSettings, topic: &str, partition: i32, offset: i64) -> Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::{Offset, TopicPartitionList};
    let admin: AdminClient<EddyContext> = settings.create("eddy kafka")?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().build().context("cannot start a runtime for the admin client")?;
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(topic, partition, Offset::Offset(offset))
        .map_err(|error| settings.redactor.error("cannot name the partition", &error))?;
    let options = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    let deleted = runtime
        .block_on(admin.delete_records(&offsets, &options))
        .map_err(|error| settings.redactor.error(&format!("cannot delete records of topic '{topic}'"), &error))?;
    for element in deleted.elements() {
        if let Err(error) = element.error() {
            return Err(settings
                .redactor
                .error(&format!("cannot delete records of topic '{topic}' partition {partition}"), &error));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Redactor;

    #[test]
    fn secrets_are_cut_whole_and_in_parts_longest_first() {
        let redactor = Redactor::new(vec!["abc1".into(), "abc1def2".into(), "user=alice password=s3cr3t-pw".into()]);
        assert_eq!(redactor.clean("key abc1def2 and abc1"), "key *** and ***");
        assert_eq!(redactor.clean("Invalid value \"s3cr3t-pw\" for"), "Invalid value \"***\" for");
        assert!(!format!("{redactor:?}").contains("abc1"));
    }
}
