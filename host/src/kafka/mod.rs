//! Kafka clients for the Kafka source, the Kafka sink and `eddy kafka`: configuration
//! from a spec's properties with credentials kept out of every output, cluster
//! metadata and offsets, and Kafka's default partitioner.

mod client;
mod headers;
mod partitioner;
mod scan;

pub use client::{
    ClientSettings, Deliveries, EddyContext, REQUEST_TIMEOUT, Redactor, TopicListing, create_topic,
    delete_records_before, delete_topic, topic_partitions, watermarks,
};
pub use headers::{RawHeader, escape_bytes, header_value, headers};
pub use partitioner::{murmur2, partition_for_key};
pub use scan::{ScanRange, scan};

/// The header naming the query that wrote a record (the Kafka sink's exactly-once).
pub const HEADER_QUERY: &str = "eddy.query";
/// The header naming the batch that wrote a record.
pub const HEADER_BATCH: &str = "eddy.batch";
/// The header holding a record's sequence number within its batch and partition.
pub const HEADER_SEQUENCE: &str = "eddy.seq";
/// The header holding the output topic's partition count the batch was planned with.
pub const HEADER_PARTITIONS: &str = "eddy.partitions";
