//! The monitoring endpoint's HTTP server. It runs inside the query's process, so no
//! client may cost the query more than a bounded share of memory, file descriptors
//! and time: one thread runs a tokio event loop (no thread per connection); at most
//! [`MAX_CONNECTIONS`] connections are served at once (more are closed on accept);
//! a request head is at most [`MAX_HEAD_BYTES`] in at most [`MAX_HEADERS`] lines
//! and must arrive whole within [`HEAD_TIMEOUT`]; a response must be taken within
//! [`WRITE_TIMEOUT`]. It answers `GET` and `HEAD` only, one request per connection.
//! On a loopback address a request must name a loopback host (`Host`), so that a web
//! page cannot reach the endpoint through DNS rebinding.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Connections served at once; more are closed as soon as they are accepted.
pub const MAX_CONNECTIONS: usize = 32;
/// The largest request head (request line and headers), in bytes.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// The most header lines a request may have.
pub const MAX_HEADERS: usize = 64;
/// How long a client has to send its whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client has to take the whole response.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait before accepting again after the process ran out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A request the routes see: its path and query string.
pub struct Request<'a> {
    pub path: &'a str,
    pub query: &'a str,
}

/// A complete response.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a text body.
    pub fn text(status: u16, body: impl Into<String>, content_type: &'static str) -> Self {
        Self { status, content_type, body: body.into().into_bytes() }
    }

    fn plain(status: u16, body: &str) -> Self {
        Self::text(status, format!("{body}\n"), "text/plain; charset=utf-8")
    }
}

/// What answers the requests.
pub type Routes = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// Listens on `address` and serves `routes` on a thread of its own; returns the
/// address it listens on (with the port the system chose for port 0).
pub fn serve(address: &str, routes: Routes) -> Result<SocketAddr> {
    let listener = TcpListener::bind(address)
        .with_context(|| format!("cannot listen on {address}; choose another --metrics address or port"))?;
    let bound = listener.local_addr().context("cannot read the monitoring address")?;
    listener.set_nonblocking(true).context("cannot make the monitoring socket non-blocking")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the monitoring event loop")?;
    let loopback_only = bound.ip().is_loopback();
    std::thread::Builder::new()
        .name("eddy-monitor".into())
        .spawn(move || runtime.block_on(accept_loop(listener, loopback_only, routes)))
        .context("cannot start the monitoring thread")?;
    Ok(bound)
}

async fn accept_loop(listener: TcpListener, loopback_only: bool, routes: Routes) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors or memory: the query's needs come first.
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Over the cap, the connection is closed at once (dropped).
        let Ok(permit) = permits.clone().try_acquire_owned() else { continue };
        let routes = routes.clone();
        tokio::spawn(async move {
            serve_connection(stream, loopback_only, &routes).await;
            drop(permit);
        });
    }
}

/// Reads one request head within [`HEAD_TIMEOUT`], answers it, closes.
async fn serve_connection(mut stream: TcpStream, loopback_only: bool, routes: &Routes) {
    let (response, head_only) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Err(_) => (Response::plain(408, "the request head took too long"), false),
        Ok(Err(HeadError::Closed)) => return,
        Ok(Err(HeadError::TooLarge)) => (Response::plain(431, "request head too large"), false),
        Ok(Ok(head)) => answer(&head, loopback_only, routes),
    };
    let bytes = encode(&response, head_only);
    let _ = tokio::time::timeout(WRITE_TIMEOUT, async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await;
}

enum HeadError {
    /// The client closed or reset the connection before a whole head.
    Closed,
    /// Longer than [`MAX_HEAD_BYTES`].
    TooLarge,
}

/// The request head, up to and including its blank line.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let read = stream.read(&mut chunk).await.map_err(|_| HeadError::Closed)?;
        if read == 0 {
            return Err(HeadError::Closed);
        }
        let searched_from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..read]);
        if let Some(end) = head_end(&head[searched_from..]) {
            head.truncate(searched_from + end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Where the head ends in `bytes` (just past its blank line), if it does.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = memchr::memmem::find(bytes, b"\r\n\r\n").map(|at| at + 4);
    let lf = memchr::memmem::find(bytes, b"\n\n").map(|at| at + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The response to a whole request head, and whether it is to a `HEAD` request.
fn answer(head: &[u8], loopback_only: bool, routes: &Routes) -> (Response, bool) {
    if head.len() > MAX_HEAD_BYTES {
        return (Response::plain(431, "request head too large"), false);
    }
    let Ok(head) = std::str::from_utf8(head) else { return (Response::plain(400, "bad request"), false) };
    let mut lines = head.lines().filter(|line| !line.is_empty());
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (Response::plain(400, "bad request"), false);
    };
    if !version.starts_with("HTTP/1.") {
        return (Response::plain(505, "HTTP/1.x only"), false);
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return (Response::plain(405, "GET only"), false);
    }
    let headers: Vec<&str> = lines.collect();
    if headers.len() > MAX_HEADERS {
        return (Response::plain(431, "too many headers"), head_only);
    }
    let host = headers.iter().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim().eq_ignore_ascii_case("host").then_some(value.trim())
    });
    if loopback_only && !host_allowed(host, version) {
        return (Response::plain(421, "this endpoint answers requests for localhost only"), head_only);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    (routes(&Request { path, query }), head_only)
}

/// Whether a request to a loopback address may be answered: its `Host` names a
/// loopback address or `localhost` (a name a DNS-rebinding page cannot own); an
/// HTTP/1.0 request may leave `Host` out.
fn host_allowed(host: Option<&str>, version: &str) -> bool {
    let Some(host) = host else { return version == "HTTP/1.0" };
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map_or("", |(inside, _)| inside),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn encode(response: &Response, head_only: bool) -> Vec<u8> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "HTTP Version Not Supported",
    };
    let mut bytes = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    )
    .into_bytes();
    if !head_only {
        bytes.extend_from_slice(&response.body);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Routes {
        Arc::new(|request: &Request| Response::text(200, format!("{}?{}", request.path, request.query), "text/plain"))
    }

    fn status(head: &str, loopback_only: bool) -> u16 {
        answer(head.as_bytes(), loopback_only, &routes()).0.status
    }

    #[test]
    fn a_loopback_endpoint_answers_loopback_hosts_only() {
        for host in ["localhost", "localhost:9464", "127.0.0.1:9464", "[::1]:9464", "127.1.2.3", "LOCALHOST."] {
            assert_eq!(status(&format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"), true), 200, "{host}");
        }
        for host in ["attacker.example:9464", "127.0.0.1.attacker.example", "10.0.0.1:9464", "[::1", ""] {
            assert_eq!(status(&format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"), true), 421, "{host}");
        }
        assert_eq!(status("GET / HTTP/1.1\r\n\r\n", true), 421, "HTTP/1.1 without Host");
        assert_eq!(status("GET / HTTP/1.0\r\n\r\n", true), 200, "HTTP/1.0 may leave Host out");
        assert_eq!(status("GET / HTTP/1.1\r\nHost: metrics.example\r\n\r\n", false), 200, "any host elsewhere");
    }

    #[test]
    fn requests_other_than_small_gets_are_refused() {
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        assert_eq!(status(&format!("GET / HTTP/1.1\r\nHost: localhost\r\n{many}\r\n"), true), 431);
        assert_eq!(status("POST / HTTP/1.1\r\nHost: localhost\r\n\r\n", true), 405);
        assert_eq!(status("GET / HTTP/2\r\nHost: localhost\r\n\r\n", true), 505);
        assert_eq!(status("GET /\r\n\r\n", true), 400);
        let (response, head_only) = answer(b"GET /a?b=1 HTTP/1.1\r\nHost: localhost\r\n\r\n", true, &routes());
        assert_eq!((response.body.as_slice(), head_only), (b"/a?b=1".as_slice(), false));
        let encoded = encode(&response, true);
        assert!(encoded.ends_with(b"Content-Length: 6\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn the_head_ends_at_its_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
    }
}
