//! The `eddy` binary.

use clap::Parser;

/// mimalloc: a state-heavy batch makes millions of small allocations (keys, values,
/// change-log entries), where it is markedly faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    keep_large_blocks_for_reuse();
    match eddy::cli::Cli::parse().execute() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The message may quote data: its control characters are escaped.
            eprintln!("error: {}", eddy::util::printable(&format!("{error:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

/// RocksDB allocates with the C library's allocator: its memtables' arena blocks and
/// each commit's write batch are megabytes, which glibc by default maps fresh and
/// unmaps when freed, so that every commit page-faults tens of megabytes in again
/// (a third of a commit's time). Blocks up to 64 MiB come from the heap instead and
/// are reused, up to 128 MiB of free memory kept at its top; two arenas.
fn keep_large_blocks_for_reuse() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
