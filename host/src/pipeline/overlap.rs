//! Whether a directory eddy writes (the sink's output, a dead-letter directory) lies
//! within a file source's path: the source would read eddy's own output back as
//! input, a batch's output feeding the next batch without end.

use std::path::{Component, Path, PathBuf};

use anyhow::Result;
use toml::Spanned;

use super::located::Locator;
use super::model::{BadRecordPolicy, SourceKind, SourceSpec};

/// Refuses a written directory `written` (the spec key `key` at `span`) equal to or
/// inside the path of one of the file sources.
pub(super) fn refuse_within_sources(
    at: &Locator,
    span: &Spanned<String>,
    key: &str,
    written: &Path,
    sources: &[SourceSpec],
) -> Result<()> {
    for source in sources {
        if let SourceKind::Files { path, .. } = &source.kind
            && within(written, path)
        {
            return Err(at.at(
                span,
                key,
                format!(
                    "{} is within source '{}''s path {}: the source would read what eddy writes there as new \
                     input; choose a directory outside it",
                    written.display(),
                    source.name,
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses each source's dead-letter directory within any file source's path.
pub(super) fn refuse_dead_letters_within_sources(
    at: &Locator,
    raw_paths: &[Option<&Spanned<String>>],
    sources: &[SourceSpec],
) -> Result<()> {
    for (index, (source, raw)) in sources.iter().zip(raw_paths).enumerate() {
        if let (BadRecordPolicy::DeadLetter(dir), Some(raw)) = (&source.on_bad_record, raw) {
            refuse_within_sources(at, raw, &format!("source[{index}].dead-letter-path"), dir, sources)?;
        }
    }
    Ok(())
}

/// Whether `inner` is `outer` or lies inside it, after resolving `.`, `..` and the
/// symbolic links of the parts that exist.
fn within(inner: &Path, outer: &Path) -> bool {
    resolved(inner).starts_with(resolved(outer))
}

/// `path` made absolute: its longest existing ancestor canonicalized (links
/// resolved), the rest appended with `.` and `..` applied.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut normal = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    let mut existing = normal.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            return rest.iter().rev().fold(canonical, |path, part| path.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return normal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Pipeline;

    /// The error of a spec whose file source reads `in/` and whose sink and dead
    /// letters write to `sink` and `dead`, or `None` if it is valid.
    fn spec_error(sink: &str, dead: &str) -> Option<String> {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("in")).expect("input");
        std::fs::write(dir.path().join("p.wasm"), b"").expect("module");
        let spec = format!(
            "[[source]]\nformat = \"json\"\npath = \"in\"\nschema = \"user STRING\"\n\
             on-bad-record = \"dead-letter\"\ndead-letter-path = \"{dead}\"\n\n\
             [operator]\nmodule = \"p.wasm\"\nkey = [\"user\"]\n\n[sink]\nformat = \"json\"\npath = \"{sink}\"\n"
        );
        Pipeline::parse(&dir.path().join("p.toml"), &spec).err().map(|error| error.to_string())
    }

    #[test]
    fn a_sink_or_dead_letter_directory_within_a_source_path_is_refused() {
        assert_eq!(spec_error("out", "bad"), None);
        for sink in ["in", "in/out", "./in/", "out/../in"] {
            let error = spec_error(sink, "bad").unwrap_or_else(|| panic!("sink path {sink} is accepted"));
            assert!(
                error.contains(":14: sink.path: ") && error.contains("is within source 'source-0''s path"),
                "{error}"
            );
        }
        let error = spec_error("out", "in/bad").expect("dead letters inside the source are refused");
        assert!(error.contains(":6: source[0].dead-letter-path: ") && error.contains("is within source"), "{error}");
    }

    #[test]
    fn a_path_is_within_itself_and_its_ancestors_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let input = dir.path().join("input");
        std::fs::create_dir(&input).expect("input");
        assert!(within(&input, &input));
        assert!(within(&input.join("out"), &input), "not yet created");
        assert!(within(&dir.path().join("x/../input/./out"), &input));
        assert!(!within(&dir.path().join("input-out"), &input), "a sibling with the same prefix");
        assert!(!within(dir.path(), &input));
        std::os::unix::fs::symlink(&input, dir.path().join("link")).expect("link");
        assert!(within(&dir.path().join("link/out"), &input), "through a link");
    }
}
