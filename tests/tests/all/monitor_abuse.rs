//! The monitoring endpoint runs inside the query's process: abusive clients must not
//! be a way to stop it. A real query (`eddy run --metrics`) is flooded with 2 000 idle
//! connections, clients sending an endless header line and slow-loris clients that
//! trickle a request head; the query keeps committing batches, its peak RSS and its
//! thread count stay bounded, the endpoint closes every abusive connection itself and
//! answers again once the abuse ends.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use eddy_tests::{eddy_bin, wasm};

const IDLE_CONNECTIONS: usize = 2_000;
const SLOW_LORIS_CLIENTS: usize = 8;
/// Longer than the endpoint's 5 s for a request head, so that its cut shows.
const ABUSE: Duration = Duration::from_secs(12);
/// How much the peak RSS may grow under the abuse: the endpoint's own buffers are
/// 32 connections × (8 KiB head + a response), far below this.
const RSS_GROWTH_BOUND_KIB: u64 = 48 * 1024;
/// How long an abusive client waits before it connects again.
const RECONNECT_PAUSE: Duration = Duration::from_millis(20);

fn free_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("address").to_string()
}

/// A field of /proc/<pid>/status, in its unit (kB for memory).
fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the query's /proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn committed_batches(checkpoint: &Path) -> usize {
    std::fs::read_dir(checkpoint.join("commits")).map_or(0, |entries| entries.flatten().count())
}

fn get(address: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.split_whitespace().nth(1)?.parse().ok()?, body.to_string()))
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < Duration::from_secs(60), "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Makes room for the idle connections in this process's descriptor limit.
fn raise_descriptor_limit(needed: u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0, "getrlimit");
        if limit.rlim_cur < needed {
            assert!(limit.rlim_max >= needed, "the hard descriptor limit {} is below {needed}", limit.rlim_max);
            limit.rlim_cur = needed;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0, "setrlimit");
        }
    }
}

/// The query's process, killed if the test ends before it stopped it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn start_query(dir: &Path, address: &str) -> Running {
    let spec = format!(
        "name = \"abused\"\n\n[[source]]\nformat = \"rate\"\nrows-per-second = 500\n\n\
         [operator]\nmodule = {:?}\nkey = [\"value\"]\noutput-mode = \"update\"\n\n\
         [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\nprocessing-time = \"200 ms\"\n",
        wasm("noop")
    );
    std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
    let child = Command::new(eddy_bin())
        .args(["run", "pipeline.toml", "--checkpoint", "checkpoint", "--metrics", address])
        .current_dir(dir)
        .env("EDDY_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("eddy starts");
    Running(child)
}

/// Sends one endless header line per connection, reconnecting whenever the endpoint
/// cuts it, until `stop`; returns how many connections were cut and the most bytes
/// one took before (what the kernel's socket buffers hold, if the endpoint stops
/// reading at its limit; everything sent, if it reads on).
fn endless_header(address: String, stop: Arc<AtomicBool>) -> (u64, u64) {
    let chunk = vec![b'a'; 64 * 1024];
    let (mut cut, mut most) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        // A pause between connections: the test measures memory, not CPU.
        std::thread::sleep(RECONNECT_PAUSE);
        let Ok(mut stream) = TcpStream::connect(&address) else { continue };
        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        if stream.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Endless: ").is_err() {
            continue;
        }
        let mut sent = 0;
        while !stop.load(Ordering::Relaxed) {
            if stream.write_all(&chunk).is_err() {
                cut += 1;
                break;
            }
            sent += chunk.len() as u64;
        }
        most = most.max(sent);
    }
    (cut, most)
}

/// Trickles a request head one byte every 250 ms and never finishes it, reconnecting
/// when the endpoint closes the connection; returns the longest the endpoint let a
/// connection live.
fn slow_loris(address: String, stop: Arc<AtomicBool>, cut: Arc<AtomicU64>) -> Duration {
    let mut longest = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(RECONNECT_PAUSE);
        let Ok(mut stream) = TcpStream::connect(&address) else { continue };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(250)));
        let opened = Instant::now();
        let _ = stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
        let mut byte = [0u8; 512];
        loop {
            if stop.load(Ordering::Relaxed) {
                return longest;
            }
            match stream.read(&mut byte) {
                Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if stream.write_all(b"x").is_err() {
                        break;
                    }
                }
                // A response (408) or the end: the endpoint cut it.
                _ => break,
            }
        }
        cut.fetch_add(1, Ordering::Relaxed);
        longest = longest.max(opened.elapsed());
    }
    longest
}

/// Whether the endpoint closed (or answered) `stream` rather than keeping it open.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).expect("non-blocking");
    let mut buffer = [0u8; 512];
    !matches!(stream.read(&mut buffer), Err(error) if error.kind() == ErrorKind::WouldBlock)
}

#[test]
fn abusive_monitoring_clients_neither_stop_the_query_nor_grow_its_memory() {
    raise_descriptor_limit(IDLE_CONNECTIONS as u64 + 512);
    let dir = tempfile::tempdir().expect("temp dir");
    let checkpoint = dir.path().join("checkpoint");
    let address = free_address();
    let mut query = start_query(dir.path(), &address);
    let pid = query.0.id();
    wait_until("five committed batches", || committed_batches(&checkpoint) >= 5);
    wait_until("the endpoint", || get(&address, "/healthz").is_some_and(|(status, _)| status == 200));
    // The thread count may vary with batches: its most over two seconds of quiet.
    let mut threads_before = 0;
    for _ in 0..10 {
        threads_before = threads_before.max(status_field(pid, "Threads"));
        std::thread::sleep(Duration::from_millis(200));
    }
    let rss_before = status_field(pid, "VmHWM");
    let batches_before = committed_batches(&checkpoint);

    let stop = Arc::new(AtomicBool::new(false));
    let cut = Arc::new(AtomicU64::new(0));
    let endless: Vec<_> = (0..2)
        .map(|_| {
            let (address, stop) = (address.clone(), stop.clone());
            std::thread::spawn(move || endless_header(address, stop))
        })
        .collect();
    let loris: Vec<_> = (0..SLOW_LORIS_CLIENTS)
        .map(|_| {
            let (address, stop, cut) = (address.clone(), stop.clone(), cut.clone());
            std::thread::spawn(move || slow_loris(address, stop, cut))
        })
        .collect();
    let mut idle: Vec<TcpStream> = (0..IDLE_CONNECTIONS)
        .map(|i| TcpStream::connect(&address).unwrap_or_else(|error| panic!("idle connection {i}: {error}")))
        .collect();
    let started = Instant::now();
    let mut peak_threads = 0;
    while started.elapsed() < ABUSE {
        peak_threads = peak_threads.max(status_field(pid, "Threads"));
        std::thread::sleep(Duration::from_millis(200));
    }
    let batches_during = committed_batches(&checkpoint) - batches_before;
    let rss_peak = status_field(pid, "VmHWM");
    let still_open = idle.iter_mut().map(closed_by_server).filter(|closed| !closed).count();
    stop.store(true, Ordering::Relaxed);
    let endless: Vec<(u64, u64)> = endless.into_iter().map(|t| t.join().expect("endless-header client")).collect();
    let endless_cut: u64 = endless.iter().map(|(cut, _)| cut).sum();
    let endless_most = endless.iter().map(|(_, most)| *most).max().unwrap_or_default();
    let longest_loris = loris.into_iter().map(|t| t.join().expect("slow-loris client")).max().unwrap_or_default();
    drop(idle);

    println!(
        "under abuse for {} s: {batches_during} batches committed; peak RSS {rss_before} kB before, {rss_peak} kB \
         after; threads {threads_before} before, at most {peak_threads} during; {endless_cut} endless-header \
         connections cut, the most one took {endless_most} bytes; {} slow-loris connections cut, the longest \
         after {longest_loris:?}",
        ABUSE.as_secs(),
        cut.load(Ordering::Relaxed)
    );
    assert!(query.0.try_wait().expect("query status").is_none(), "the query still runs");
    assert!(batches_during >= 5, "only {batches_during} batches committed under abuse");
    assert!(
        rss_peak <= rss_before + RSS_GROWTH_BOUND_KIB,
        "peak RSS grew from {rss_before} kB to {rss_peak} kB under abuse"
    );
    assert!(peak_threads <= threads_before + 2, "threads grew from {threads_before} to {peak_threads}");
    assert_eq!(still_open, 0, "the endpoint closes idle connections itself");
    // Cut at the 8 KiB head limit, a connection takes what the socket buffers hold
    // (a few MiB), not what 12 s of sending amounts to (gigabytes on loopback).
    assert!(endless_cut >= 2, "every endless header line was cut");
    assert!(endless_most < 64 << 20, "an endless header connection took {endless_most} bytes");
    assert!(cut.load(Ordering::Relaxed) >= SLOW_LORIS_CLIENTS as u64, "every slow-loris connection was cut");
    assert!(longest_loris < Duration::from_secs(8), "a slow-loris connection lived {longest_loris:?}");

    // The abuse over, the endpoint answers again.
    wait_until("the endpoint after the abuse", || get(&address, "/healthz").is_some_and(|(status, _)| status == 200));
    let kill = Command::new("kill").args(["-TERM", &pid.to_string()]).status().expect("kill");
    assert!(kill.success());
    assert!(query.0.wait().expect("eddy stops").success(), "a graceful stop");
}

#[test]
fn a_loopback_endpoint_refuses_requests_for_other_host_names() {
    let dir = tempfile::tempdir().expect("temp dir");
    let address = free_address();
    let _query = start_query(dir.path(), &address);
    wait_until("the endpoint", || get(&address, "/healthz").is_some());
    let request = |host: &str| {
        let mut stream = TcpStream::connect(&address).expect("connects");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        write!(stream, "GET /api/progress HTTP/1.1\r\nHost: {host}\r\n\r\n").expect("request");
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response.split_whitespace().nth(1).unwrap_or_default().to_string()
    };
    // A DNS-rebinding page reaches 127.0.0.1 under its own name.
    assert_eq!(request("rebound.attacker.example"), "421");
    assert_eq!(request(&address), "200");
    assert_eq!(request(&address.replace("127.0.0.1", "localhost")), "200");
}
