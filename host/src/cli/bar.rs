//! A terminal progress bar for long available-now runs: `[#####-----] 12/40 files`,
//! redrawn in place on stderr when stderr is a terminal, and silent otherwise (so that
//! logs and pipes never see it).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How many characters the bar itself is wide.
const WIDTH: usize = 30;

/// The least time between two redraws (the last step is always drawn).
const REDRAW_EVERY: Duration = Duration::from_millis(100);

/// A progress bar counting `done` of `total` units.
pub struct Bar {
    out: Option<Box<dyn Write + Send>>,
    total: u64,
    done: u64,
    unit: String,
    last_draw: Option<Instant>,
    finished: bool,
}

impl Bar {
    /// A bar of `total` `unit`s (e.g. `"files"`) on stderr, or a no-op when stderr is
    /// not a terminal.
    pub fn new(total: u64, unit: &str) -> Self {
        let out: Option<Box<dyn Write + Send>> =
            if std::io::stderr().is_terminal() { Some(Box::new(std::io::stderr())) } else { None };
        Self::with_output(out, total, unit)
    }

    /// A bar drawn on `out` (`None`: nowhere).
    pub fn with_output(out: Option<Box<dyn Write + Send>>, total: u64, unit: &str) -> Self {
        Self { out, total, done: 0, unit: unit.to_string(), last_draw: None, finished: false }
    }

    /// Whether the bar draws anything.
    #[cfg(test)]
    fn is_visible(&self) -> bool {
        self.out.is_some()
    }

    /// Sets how many units are done, and redraws (at most every 100 ms).
    pub fn set(&mut self, done: u64) {
        self.done = done;
        self.draw(done >= self.total);
    }

    /// Draws the final state and ends the line.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.draw(true);
        self.finished = true;
        if let Some(out) = self.out.as_mut().filter(|_| self.last_draw.is_some()) {
            // A progress bar that cannot be drawn is not worth failing a query for.
            let _ = writeln!(out).and_then(|()| out.flush());
        }
    }

    fn draw(&mut self, force: bool) {
        if self.finished {
            return;
        }
        let Some(out) = self.out.as_mut() else { return };
        if !force && self.last_draw.is_some_and(|at| at.elapsed() < REDRAW_EVERY) {
            return;
        }
        self.last_draw = Some(Instant::now());
        let line = render(self.done, self.total, &self.unit);
        let _ = write!(out, "\r{line}\x1b[K").and_then(|()| out.flush());
    }
}

impl Drop for Bar {
    /// Ends the bar's line so that whatever is printed next starts on its own line.
    fn drop(&mut self) {
        self.finish();
    }
}

/// One bar line: `[#####-----] 12/40 files` (the bar [`WIDTH`] characters wide).
pub fn render(done: u64, total: u64, unit: &str) -> String {
    let filled = if total == 0 { WIDTH } else { (done.min(total) as u128 * WIDTH as u128 / total as u128) as usize };
    let bar = format!("{}{}", "#".repeat(filled), "-".repeat(WIDTH - filled));
    if unit.is_empty() { format!("[{bar}] {done}/{total}") } else { format!("[{bar}] {done}/{total} {unit}") }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

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
        assert_eq!(render(5, 3, "batches"), format!("[{}] 5/3 batches", "#".repeat(30)));
        assert_eq!(render(0, 0, "files"), format!("[{}] 0/0 files", "#".repeat(30)));
        assert!(render(u64::MAX - 1, u64::MAX, "rows").starts_with(&format!("[{}-]", "#".repeat(29))));
    }

    #[test]
    fn redraws_in_place_and_ends_the_line_once() {
        let out = Shared::default();
        let mut bar = Bar::with_output(Some(Box::new(out.clone())), 4, "files");
        assert!(bar.is_visible());
        bar.set(1);
        bar.set(2); // within 100 ms of the last draw: skipped
        bar.set(4); // the last step: always drawn
        bar.finish();
        drop(bar);
        let expected = format!(
            "\r{}\x1b[K\r{}\x1b[K\r{}\x1b[K\n",
            render(1, 4, "files"),
            render(4, 4, "files"),
            render(4, 4, "files")
        );
        assert_eq!(out.text(), expected);
    }

    #[test]
    fn a_hidden_bar_draws_nothing() {
        let mut bar = Bar::with_output(None, 10, "files");
        assert!(!bar.is_visible());
        bar.set(3);
        bar.finish();
    }

    #[test]
    fn without_a_terminal_the_bar_is_hidden() {
        // Test runs capture stderr, so it is not a terminal here.
        if !std::io::stderr().is_terminal() {
            assert!(!Bar::new(10, "files").is_visible());
        }
    }
}
