//! The RocksDB options of the state store. Others were tried on the jobs of `make
//! bench-window` and measured no better: no compression, larger memtables or a total
//! memtable budget, a later level-0 compaction, no bloom filters, no compaction of the
//! change log, memtables merged before they flush (four per family, two merged).

use std::path::Path;

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

/// The database's options: created when missing, LZ4, a bounded write-ahead log, and
/// flushes and compactions that write their files past the page cache when `dir`'s
/// file system allows (the built-in window job's change log, ≈ 33 MB a batch, was
/// otherwise copied into the page cache by the flush: built-in window benchmark CPU
/// 5.1–5.7 s → 4.1–4.7 s).
pub(super) fn db_options(dir: &Path) -> Options {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    options.set_compression_type(DBCompressionType::Lz4);
    // Column families written little per batch (meta, timers) would otherwise keep
    // every write-ahead log alive until ~1.5 GB of them piled up, all replayed after
    // a crash; past this total RocksDB flushes them, bounding recovery.
    options.set_max_total_wal_size(MAX_TOTAL_WAL_BYTES);
    options.set_use_direct_io_for_flush_and_compaction(writes_direct(dir));
    options
}

/// Whether files in `dir` can be written with `O_DIRECT` (RocksDB's flushes fail on a
/// file system that refuses it): one aligned block is written to a probe file, removed.
fn writes_direct(dir: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        /// A block of the size and alignment direct writes need.
        #[repr(C, align(4096))]
        struct Block([u8; 4096]);
        let probe = dir.join("direct-io-probe");
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&probe)
            .and_then(|mut file| file.write_all(&Block([0; 4096]).0));
        let _ = std::fs::remove_file(&probe);
        written.is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_direct_write_probe_leaves_nothing_behind() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let direct = writes_direct(dir.path());
        // ext4 and xfs take direct writes; a directory that does not exist takes none.
        assert!(!writes_direct(&dir.path().join("missing")));
        assert_eq!(std::fs::read_dir(dir.path())?.count(), 0, "direct writes: {direct}");
        Ok(())
    }
}
