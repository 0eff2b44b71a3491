//! The RocksDB options of the state store. Others were tried on the jobs of `make
//! bench-window` and measured no better: no compression, larger memtables or a total
//! memtable budget, a later level-0 compaction, no bloom filters, no compaction of the
//! change log, memtables merged before they flush (four per family, two merged).

use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options};

use super::layout::{CHANGELOG, Cf};

/// The write-ahead log size past which RocksDB flushes the column families that hold
/// its oldest entries (what a restart after a crash replays is about this much).
const MAX_TOTAL_WAL_BYTES: u64 = 64 << 20;

/// The block cache shared by the column families (uncompressed blocks read from
/// disk; RocksDB's default is 32 MiB per column family).
const BLOCK_CACHE_BYTES: usize = 64 << 20;

/// The change log's memtable size.
const CHANGELOG_MEMTABLE_BYTES: usize = 32 << 20;

/// The memtable size of the timer families (`timers`, `timer_index`): a batch that
/// fires as many timers as it registers (a window per key) writes ~10 MB to each, and
/// RocksDB's default (64 MiB, two per family) held ~35 MiB more of them in memory at
/// the WebAssembly window job's peak, for no speed.
const TIMER_MEMTABLE_BYTES: usize = 16 << 20;

/// The database's options: created when missing, LZ4, a bounded write-ahead log.
pub(super) fn db_options() -> Options {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    options.set_compression_type(DBCompressionType::Lz4);
    // Column families written little per batch (meta, timers) would otherwise keep
    // every write-ahead log alive until ~1.5 GB of them piled up, all replayed after
    // a crash; past this total RocksDB flushes them, bounding recovery.
    options.set_max_total_wal_size(MAX_TOTAL_WAL_BYTES);
    options
}

/// The block cache the column families share.
pub(super) fn shared_block_cache() -> Cache {
    Cache::new_lru_cache(BLOCK_CACHE_BYTES)
}

/// The options of the column family `name`: LZ4 blocks, the shared block cache, bloom
/// filters (a lookup of a key that is not there rarely reads a block). The change log
/// (`changelog`) is written in large chunks and read rarely: no compression, smaller
/// memtables; the timer families, smaller memtables.
pub(super) fn family_options(cache: &Cache, name: &str) -> Options {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_bloom_filter(10.0, false);
    let mut options = Options::default();
    options.set_block_based_table_factory(&table);
    if name == CHANGELOG {
        options.set_compression_type(DBCompressionType::None);
        options.set_write_buffer_size(CHANGELOG_MEMTABLE_BYTES);
    } else {
        options.set_compression_type(DBCompressionType::Lz4);
    }
    if name == Cf::Timers.name() || name == Cf::TimerIndex.name() {
        options.set_write_buffer_size(TIMER_MEMTABLE_BYTES);
    }
    options
}
