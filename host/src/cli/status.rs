//! The live status line of `eddy run` on a terminal: the last batch, its rate, the
//! watermark's lag and the state's size — and, for an available-now run, a bar of the
//! files it works through: `[#####-----] 12/40 files · batch 7 · 3,400 rows/s · …`.
//! It is redrawn in place on stderr, cleared while a batch prints its output, and
//! never written anywhere but a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::checkpoint::QueryProgress;

/// How many characters the files bar is wide.
const WIDTH: usize = 30;

/// The least time between two redraws of the same line.
const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// The status line of a run.
pub struct StatusLine {
    out: Option<Box<dyn Write + Send>>,
    files: Option<(u64, u64)>,
    batch: Option<String>,
    shown: bool,
    last_draw: Option<Instant>,
}

impl StatusLine {
    /// A status line on stderr when it is a terminal and `enabled`; otherwise silent.
    pub fn new(enabled: bool) -> Self {
        let terminal = enabled && std::io::stderr().is_terminal();
        Self::with_output(if terminal { Some(Box::new(std::io::stderr())) } else { None })
    }

    /// A status line drawn on `out` (`None`: nowhere).
    pub fn with_output(out: Option<Box<dyn Write + Send>>) -> Self {
        Self { out, files: None, batch: None, shown: false, last_draw: None }
    }

    /// Whether anything is drawn.
    pub fn is_visible(&self) -> bool {
        self.out.is_some()
    }

    /// Shows a files bar: `done` of `total` files.
    pub fn set_files(&mut self, done: u64, total: u64) {
        self.files = Some((done, total));
    }

    /// Shows the fields of the last batch's progress record; `watermark_us` is the
    /// watermark it ran with.
    pub fn set_batch(&mut self, record: &QueryProgress, watermark_us: Option<i64>) {
        self.batch = Some(describe(record, watermark_us));
    }

    /// Draws the line (at most every 100 ms unless `force`).
    pub fn draw(&mut self, force: bool) {
        if !force && self.shown && self.last_draw.is_some_and(|at| at.elapsed() < REDRAW_EVERY) {
            return;
        }
        let line = self.text();
        let Some(out) = self.out.as_mut() else { return };
        if line.is_empty() {
            return;
        }
        // A status line that cannot be drawn is not worth failing a query for.
        let _ = write!(out, "\r{line}\x1b[K").and_then(|()| out.flush());
        self.shown = true;
        self.last_draw = Some(Instant::now());
    }

    /// Removes the line, so that what is printed next starts on a clean line.
    pub fn clear(&mut self) {
        if let Some(out) = self.out.as_mut().filter(|_| self.shown) {
            let _ = write!(out, "\r\x1b[K").and_then(|()| out.flush());
            self.shown = false;
        }
    }

    /// Draws the last state and ends its line.
    pub fn finish(&mut self) {
        self.draw(true);
        if let Some(out) = self.out.as_mut().filter(|_| self.shown) {
            let _ = writeln!(out).and_then(|()| out.flush());
            self.shown = false;
        }
    }

    fn text(&self) -> String {
        let parts: Vec<String> = [self.files.map(|(done, total)| render(done, total, "files")), self.batch.clone()]
            .into_iter()
            .flatten()
            .collect();
        parts.join(" · ")
    }
}

/// The status of a batch: `batch 7 · 3,400 rows/s · watermark lag 4 s · state 102,000 rows`.
fn describe(record: &QueryProgress, watermark_us: Option<i64>) -> String {
    let mut parts = vec![
        format!("batch {}", record.batch_id),
        format!("{} rows/s", thousands(record.processed_rows_per_second.round() as u64)),
    ];
    if let Some(lag) = watermark_us.map(|watermark| (crate::util::now_micros() - watermark).max(0) / 1_000_000) {
        parts.push(format!("watermark lag {lag} s"));
    }
    if let Some(state) = record.state_operators.first() {
        parts.push(format!("state {} rows", thousands(state.num_rows_total)));
    }
    parts.join(" · ")
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One bar: `[#####-----] 12/40 files` (the bar [`WIDTH`] characters wide).
pub fn render(done: u64, total: u64, unit: &str) -> String {
    let filled = if total == 0 { WIDTH } else { (done.min(total) as u128 * WIDTH as u128 / total as u128) as usize };
    let bar = format!("{}{}", "#".repeat(filled), "-".repeat(WIDTH - filled));
    if unit.is_empty() { format!("[{bar}] {done}/{total}") } else { format!("[{bar}] {done}/{total} {unit}") }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::checkpoint::StateOperatorProgress;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            self.0.lock().map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
        }
    }

    #[test]
    fn renders_the_share_done() {
        assert_eq!(render(12, 40, "files"), format!("[{}{}] 12/40 files", "#".repeat(9), "-".repeat(21)));
        assert_eq!(render(0, 3, "files"), format!("[{}] 0/3 files", "-".repeat(30)));
        assert_eq!(render(3, 3, ""), format!("[{}] 3/3", "#".repeat(30)));
        assert_eq!(render(0, 0, "files"), format!("[{}] 0/0 files", "#".repeat(30)));
        assert!(render(u64::MAX - 1, u64::MAX, "rows").starts_with(&format!("[{}-]", "#".repeat(29))));
    }

    #[test]
    fn shows_the_last_batch_redraws_in_place_and_clears_for_batch_output() {
        let out = Shared::default();
        let mut status = StatusLine::with_output(Some(Box::new(out.clone())));
        let record = QueryProgress {
            batch_id: 7,
            processed_rows_per_second: 3_400.4,
            state_operators: vec![StateOperatorProgress { num_rows_total: 102_000, ..Default::default() }],
            ..QueryProgress::default()
        };
        status.set_files(1, 4);
        status.set_batch(&record, Some(946_684_800_000_000)); // 2000-01-01T00:00:00Z
        status.draw(true);
        status.clear();
        status.finish();
        let text = out.text();
        let lag = (crate::util::now_micros() / 1000 - 946_684_800_000) / 1000;
        let line =
            format!("{} · batch 7 · 3,400 rows/s · watermark lag {lag} s · state 102,000 rows", render(1, 4, "files"));
        // Allow the lag to tick over a second while the test runs.
        assert!(text.starts_with(&format!("\r{}", &line[..line.len() - 30])), "{text:?}");
        assert!(text.contains("\x1b[K\r\x1b[K\r"), "drawn, cleared, drawn again: {text:?}");
        assert!(text.ends_with("state 102,000 rows\x1b[K\n"), "{text:?}");
    }

    #[test]
    fn without_a_terminal_nothing_is_drawn() {
        let mut status = StatusLine::with_output(None);
        status.set_files(1, 2);
        status.draw(true);
        status.finish();
        assert!(!status.is_visible());
        if !std::io::stderr().is_terminal() {
            assert!(!StatusLine::new(true).is_visible());
        }
        assert!(!StatusLine::new(false).is_visible());
    }
}
