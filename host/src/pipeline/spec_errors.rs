//! The errors of reading `pipeline.toml` itself (a value of the wrong type, an
//! unknown or missing key), said like every other spec error: `file:line: key:
//! problem`. The TOML reader only knows where the problem is; the key is found by
//! looking up that place in the document, and serde's wording ("invalid type: string
//! "one", expected u64") is put in the spec's terms.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// `problem` at `span` of `text`, with the dotted key there (`source[0].header`) when
/// there is one, and serde's wording made plain: `(line, key, problem)`.
pub(super) fn locate(text: &str, span: Option<Range<usize>>, problem: &str) -> (Option<usize>, Option<String>, String) {
    let problem = plain(problem.trim_end());
    let Some(span) = span else { return (None, None, problem) };
    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
    let key = DeTable::parse(text).ok().and_then(|document| {
        let mut found = None;
        search(document.get_ref(), &mut String::new(), span.start, &mut found);
        found.map(|(key, _)| key)
    });
    (Some(line), key, problem)
}

/// Walks `table` (at `path`), keeping in `found` the innermost key whose key or value
/// holds byte `at`.
fn search(table: &DeTable<'_>, path: &mut String, at: usize, found: &mut Option<(String, usize)>) {
    for (key, value) in table.iter() {
        let length = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key.get_ref());
        visit(value, key.span(), path, at, found);
        path.truncate(length);
    }
}

fn visit(
    value: &Spanned<DeValue<'_>>,
    key_span: Range<usize>,
    path: &mut String,
    at: usize,
    found: &mut Option<(String, usize)>,
) {
    for span in [key_span, value.span()] {
        let holds = span.start <= at && at < span.end.max(span.start + 1);
        if holds && found.as_ref().is_none_or(|(_, width)| span.len() <= *width) {
            *found = Some((path.clone(), span.len()));
        }
    }
    match value.get_ref() {
        DeValue::Table(table) => search(table, path, at, found),
        DeValue::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let length = path.len();
                path.push_str(&format!("[{index}]"));
                visit(item, item.span(), path, at, found);
                path.truncate(length);
            }
        }
        _ => {}
    }
}

/// serde's "invalid type: string "one", expected u64" as "expected a whole number
/// (0 or more), got the string "one"".
fn plain(problem: &str) -> String {
    let Some(rest) = problem.strip_prefix("invalid type: ").or_else(|| problem.strip_prefix("invalid value: ")) else {
        return problem.to_string();
    };
    let Some((found, expected)) = rest.rsplit_once(", expected ") else { return problem.to_string() };
    format!("expected {}, got {}", expected_in_words(expected), found_in_words(found))
}

fn expected_in_words(expected: &str) -> String {
    match expected {
        "u64" | "usize" => "a whole number (0 or more)".into(),
        "u16" => "a whole number from 0 to 65535".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        other if other.starts_with("struct ") => "a table".into(),
        other => other.to_string(),
    }
}

fn found_in_words(found: &str) -> String {
    let (kind, value) = match found.split_once(' ') {
        Some((kind, value)) => (kind, value.trim_matches('`')),
        None => (found, ""),
    };
    match kind {
        "string" => format!("the string {value}"),
        "integer" | "floating" => value.trim_start_matches("point ").trim_matches('`').to_string(),
        "boolean" => value.to_string(),
        "sequence" => "an array".into(),
        "map" => "a table".into(),
        _ => found.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::pipeline::Pipeline;

    const SPEC: &str = "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\nheader = true\n\
                        schema = \"user STRING, amount BIGINT\"\n\n\
                        [operator]\nmodule = \"p.wasm\"\nkey = [\"user\"]\nkey-groups = 128\nmemory-limit-mb = 64\n";

    /// The error of `SPEC` with `from` replaced by `to`.
    fn error(from: &str, to: &str) -> String {
        assert!(SPEC.contains(from), "{from}");
        match Pipeline::parse(Path::new("p.toml"), &SPEC.replacen(from, to, 1)) {
            Ok(_) => panic!("{to} is accepted"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn a_value_of_the_wrong_type_names_the_file_line_and_key() {
        let cases = [
            (
                "max-files-per-trigger = 1",
                "max-files-per-trigger = \"one\"",
                "p.toml:4: source[0].max-files-per-trigger: expected a whole number (0 or more), got the string \"one\"",
            ),
            (
                "max-files-per-trigger = 1",
                "max-files-per-trigger = 1.5",
                "p.toml:4: source[0].max-files-per-trigger: expected a whole number (0 or more), got 1.5",
            ),
            (
                "header = true",
                "header = \"yes\"",
                "p.toml:5: source[0].header: expected true or false, got the string \"yes\"",
            ),
            (
                "key-groups = 128",
                "key-groups = 70000",
                "p.toml:11: operator.key-groups: expected a whole number from 0 to 65535, got 70000",
            ),
            (
                "key-groups = 128",
                "key-groups = \"many\"",
                "p.toml:11: operator.key-groups: expected a whole number from 0 to 65535, got the string \"many\"",
            ),
            (
                "memory-limit-mb = 64",
                "memory-limit-mb = -5",
                "p.toml:12: operator.memory-limit-mb: expected a whole number (0 or more), got -5",
            ),
            (
                "memory-limit-mb = 64",
                "memory-limit-mb = \"64 MB\"",
                "p.toml:12: operator.memory-limit-mb: expected a whole number (0 or more), got the string \"64 MB\"",
            ),
            (
                "key = [\"user\"]",
                "key = \"user\"",
                "p.toml:10: operator.key: expected an array, got the string \"user\"",
            ),
        ];
        for (from, to, expected) in cases {
            assert_eq!(error(from, to), expected, "{to}");
        }
    }

    #[test]
    fn an_unknown_or_missing_key_is_named_too() {
        assert_eq!(
            error("header = true", "headers = true"),
            "p.toml:5: source[0].headers: unknown field `headers`, expected one of `name`, `format`, `path`, `schema`, \
             `max-files-per-trigger`, `max-bytes-per-trigger`, `max-rows-per-trigger`, `header`, `delimiter`, `rows-per-second`, `start-time`, `watermark`, \
             `on-bad-record`, `dead-letter-path`, `topics`, `topic-pattern`, `starting-offsets`, `max-offsets-per-trigger`, \
             `fail-on-data-loss`, `metadata-columns`, `kafka`"
        );
        assert_eq!(error("module = \"p.wasm\"\n", ""), "p.toml:8: operator: missing field `module`");
    }

    #[test]
    fn state_in_memory_is_a_size_with_a_default() -> anyhow::Result<()> {
        let parse = |line: &str| {
            Pipeline::parse(
                Path::new("p.toml"),
                &format!("{line}\n[[source]]\nformat = \"rate\"\n[[stage]]\nsql = \"SELECT value FROM input\"\n"),
            )
        };
        assert_eq!(parse("")?.state_in_memory, 128 << 20);
        assert_eq!(parse("state-in-memory = \"1 GiB\"")?.state_in_memory, 1 << 30);
        assert_eq!(parse("state-in-memory = 0")?.state_in_memory, 0);
        let error = parse("state-in-memory = \"lots\"").err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "p.toml:1: state-in-memory: 'lots' is not a size; expected a size like \"64 MiB\", \"512 KiB\" or a \
                 number of bytes"
            )
        );
        Ok(())
    }
}
