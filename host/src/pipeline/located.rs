//! Where a spec's problems are: byte spans of `pipeline.toml` turned into
//! `file:line: key: problem` errors, and the check every positive size or count
//! shares.

use std::ops::Range;
use std::path::Path;

use anyhow::{Result, anyhow};
use toml::Spanned;

use super::limits::RawSize;

/// Turns spans into `file:line: key: problem` errors.
pub(super) struct Locator<'a> {
    file: &'a Path,
    text: &'a str,
}

impl<'a> Locator<'a> {
    /// Errors about `text`, read from `file`.
    pub(super) fn new(file: &'a Path, text: &'a str) -> Self {
        Self { file, text }
    }

    fn line(&self, span: &Range<usize>) -> usize {
        self.text[..span.start.min(self.text.len())].matches('\n').count() + 1
    }

    pub(super) fn error(&self, span: Range<usize>, key: &str, problem: impl std::fmt::Display) -> anyhow::Error {
        anyhow!("{}:{}: {key}: {problem}", self.file.display(), self.line(&span))
    }

    /// The spec file.
    pub(super) fn file(&self) -> &Path {
        self.file
    }

    /// The line `value` starts on.
    pub(super) fn line_of<T>(&self, value: &Spanned<T>) -> usize {
        self.line(&value.span())
    }

    pub(super) fn at<T>(&self, value: &Spanned<T>, key: &str, problem: impl std::fmt::Display) -> anyhow::Error {
        self.error(value.span(), key, problem)
    }
}

/// A positive size in bytes (`in_bytes`: a number of bytes or text like "64 MiB") or
/// a positive count.
pub(super) fn positive(at: &Locator, raw: &Spanned<RawSize>, key: &str, in_bytes: bool) -> Result<u64> {
    let value = match raw.get_ref() {
        RawSize::Text(_) if !in_bytes => Err("expected a positive number".to_string()),
        size => size.bytes(),
    }
    .map_err(|problem| at.at(raw, key, problem))?;
    if value == 0 {
        let expected =
            if in_bytes { "expected a positive size, e.g. \"64 MiB\"" } else { "expected a positive number" };
        return Err(at.at(raw, key, expected));
    }
    Ok(value)
}
