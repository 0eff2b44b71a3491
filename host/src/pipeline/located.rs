//! Where a spec's problems are: byte spans of `pipeline.toml` turned into
//! `file:line: key: problem` errors, and the checks many keys share: a positive size
//! or count, one word of a few, an output mode.

use std::ops::Range;
use std::path::Path;

use anyhow::{Result, anyhow};
use toml::Spanned;

use super::limits::RawSize;
use crate::contract::OutputMode;

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

/// A positive number (`what`: "number", "number of batches", …); 0 is refused.
pub(super) fn positive_number(at: &Locator, raw: &Spanned<u64>, key: &str, what: &str) -> Result<u64> {
    match *raw.get_ref() {
        0 => Err(at.at(raw, key, format!("expected a positive {what}"))),
        n => Ok(n),
    }
}

/// The value of the word `raw` names among `choices`; another word is an error that
/// lists them: `unknown {what} 'x'; expected "a", "b" or "c"`.
pub(super) fn one_of<T: Copy>(
    at: &Locator,
    raw: &Spanned<String>,
    key: &str,
    what: &str,
    choices: &[(&str, T)],
) -> Result<T> {
    match choices.iter().find(|(word, _)| word == raw.get_ref()) {
        Some((_, value)) => Ok(*value),
        None => {
            let words: Vec<&str> = choices.iter().map(|(word, _)| *word).collect();
            Err(unknown(at, raw, key, what, &words))
        }
    }
}

/// The error for a word that is none of `words`.
pub(super) fn unknown(at: &Locator, raw: &Spanned<String>, key: &str, what: &str, words: &[&str]) -> anyhow::Error {
    let quoted: Vec<String> = words.iter().map(|word| format!("\"{word}\"")).collect();
    let expected = match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    at.at(raw, key, format!("unknown {what} '{}'; expected {expected}", raw.get_ref()))
}

/// The output mode `raw` names, `default` when absent. A mode outside `allowed` is
/// refused with `why_not(mode)`; a word that names no mode lists the allowed ones.
pub(super) fn output_mode(
    at: &Locator,
    raw: Option<&Spanned<String>>,
    key: &str,
    default: OutputMode,
    allowed: &[OutputMode],
    why_not: impl Fn(OutputMode) -> String,
) -> Result<OutputMode> {
    const MODES: [(&str, OutputMode); 3] =
        [("append", OutputMode::Append), ("update", OutputMode::Update), ("complete", OutputMode::Complete)];
    let Some(raw) = raw else { return Ok(default) };
    match MODES.iter().find(|(word, _)| word == raw.get_ref()) {
        Some((_, mode)) if allowed.contains(mode) => Ok(*mode),
        Some((_, mode)) => Err(at.at(raw, key, why_not(*mode))),
        None => {
            let words: Vec<&str> =
                MODES.iter().filter(|(_, mode)| allowed.contains(mode)).map(|(word, _)| *word).collect();
            Err(unknown(at, raw, key, "output mode", &words))
        }
    }
}
