//! The new user's tour in every language: `eddy new processor NAME --lang L` makes a
//! project whose own unit tests pass, `eddy build` turns it into a component with the
//! pinned toolchain, and `eddy run` prints the running totals of its sample input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use eddy::project::{Language, Toolchains};
use eddy_tests::eddy_bin;

fn check(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs the project's own unit tests with its language's tools.
fn unit_tests(project: &Path, language: Language) -> Output {
    let mut command = match language {
        Language::Rust => {
            let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            command.args(["test", "--quiet"]);
            command
        }
        Language::Python => {
            let mut command = Command::new(Toolchains::from_env().python_venv().join("bin/python"));
            command.args(["-m", "pytest", "-q", "-p", "no:cacheprovider"]);
            command
        }
        Language::Js | Language::Ts => {
            let mut command = Command::new("npm");
            command.args(["test", "--silent"]);
            command
        }
    };
    command.current_dir(project).output().expect("the unit tests start")
}

/// Each batch's rows `user|count|sum` from the console sink's tables.
fn printed_batches(printed: &str) -> Vec<BTreeSet<String>> {
    let mut batches: Vec<BTreeSet<String>> = Vec::new();
    for line in printed.lines() {
        if line.starts_with("Batch: ") {
            batches.push(BTreeSet::new());
        } else if let Some(row) = line.strip_prefix("| ").filter(|_| !line.starts_with("| user")) {
            let cells: Vec<&str> = row.trim_end_matches('|').split('|').map(str::trim).collect();
            batches.last_mut().expect("a row after a batch header").insert(cells.join("|"));
        }
    }
    batches
}

/// The running totals of the project's input files (one batch each), computed here.
fn expected_batches(project: &Path) -> Vec<BTreeSet<String>> {
    let mut files: Vec<_> =
        std::fs::read_dir(project.join("input")).expect("input").map(|e| e.expect("entry").path()).collect();
    files.sort();
    let mut totals: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    files
        .iter()
        .map(|file| {
            let mut seen = BTreeSet::new();
            for line in std::fs::read_to_string(file).expect("input file").lines() {
                let row: serde_json::Value = serde_json::from_str(line).expect("JSON line");
                let user = row["user"].as_str().expect("user").to_string();
                let entry = totals.entry(user.clone()).or_default();
                entry.0 += 1;
                entry.1 += row["amount"].as_i64().unwrap_or(0);
                seen.insert(user);
            }
            seen.iter().map(|user| format!("{user}|{}|{}", totals[user].0, totals[user].1)).collect()
        })
        .collect()
}

#[test]
fn a_new_project_tests_builds_and_runs_in_every_language() {
    let dir = tempfile::tempdir().expect("temp dir");
    for language in [Language::Rust, Language::Python, Language::Js, Language::Ts] {
        let name = format!("tour-{language}");
        let created = Command::new(eddy_bin())
            .args(["new", "processor", &name, "--lang", &language.to_string(), "--dir"])
            .arg(dir.path())
            .output()
            .expect("eddy new");
        check(created, &format!("eddy new ({language})"));
        let project = dir.path().join(&name);
        check(unit_tests(&project, language), &format!("the {language} project's unit tests"));
        let built = Command::new(eddy_bin()).arg("build").current_dir(&project).output().expect("eddy build");
        let report = check(built, &format!("eddy build ({language})"));
        assert!(report.contains("its imports and exports match eddy's contract"), "{report}");
        let printed =
            Command::new(eddy_bin()).args(["run", "pipeline.toml"]).current_dir(&project).output().expect("run");
        let printed = check(printed, &format!("eddy run ({language})"));
        assert_eq!(printed_batches(&printed), expected_batches(&project), "{language}:\n{printed}");
    }
}

#[test]
fn a_project_is_not_created_over_another_or_under_a_bad_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    let new = |name: &str| {
        Command::new(eddy_bin())
            .args(["new", "processor", name, "--lang", "python", "--dir"])
            .arg(dir.path())
            .output()
            .expect("eddy new")
    };
    check(new("first"), "eddy new");
    let again = new("first");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists and is not empty"));
    let bad = new("My Processor");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a project name"));
    let not_a_project = Command::new(eddy_bin()).arg("build").arg(dir.path()).output().expect("eddy build");
    assert!(String::from_utf8_lossy(&not_a_project.stderr).contains("is not a processor project"));
}
