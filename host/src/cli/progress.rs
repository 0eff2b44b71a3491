//! `eddy progress CHECKPOINT [--last N] [--follow] [--pretty]`: prints a query's
//! progress records (one JSON object per batch, Spark's field names) from its
//! checkpoint, and with `--follow` keeps printing new ones as the query runs.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::checkpoint::{CheckpointDir, QueryProgress};

/// Prints a query's progress records from its checkpoint.
#[derive(Args, Debug, Clone)]
pub struct ProgressArgs {
    /// The query's checkpoint directory.
    pub checkpoint: PathBuf,
    /// Prints only the last N records (default: all).
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Keeps running and prints each new record as the query writes it.
    #[arg(long)]
    pub follow: bool,
    /// Indents each record instead of printing one JSON object per line.
    #[arg(long)]
    pub pretty: bool,
}

/// Runs `eddy progress`, printing to stdout. A closed stdout (e.g. `| head`) ends it
/// quietly.
pub fn run(args: &ProgressArgs) -> Result<()> {
    super::print_to_stdout(|out| print_records(args, out))
}

/// Prints the records `args` asks for to `out`; with `--follow`, never returns but
/// on an error.
pub fn print_records(args: &ProgressArgs, out: &mut impl Write) -> Result<()> {
    let log = CheckpointDir::new(&args.checkpoint).progress().open_existing()?;
    let records = match args.last {
        Some(n) => log.last(n)?,
        None => log.all()?,
    };
    for record in &records {
        print_record(record, args.pretty, out)?;
    }
    if !args.follow {
        return Ok(());
    }
    // Every batch after the newest present, even if `--last` showed fewer.
    let newest = log.batch_ids()?.last().copied();
    let after = records.last().map(|record| record.batch_id).max(newest);
    log.follower(after).follow(|record| {
        print_record(record, args.pretty, out)?;
        Ok(ControlFlow::Continue(()))
    })
}

/// One record: a compact JSON line, or indented JSON.
fn print_record(record: &QueryProgress, pretty: bool, out: &mut impl Write) -> Result<()> {
    let text = if pretty { serde_json::to_string_pretty(record) } else { serde_json::to_string(record) }
        .context("cannot serialize a progress record")?;
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::checkpoint::SinkProgress;

    #[derive(Parser)]
    struct TestCli {
        #[command(flatten)]
        args: ProgressArgs,
    }

    fn record(batch_id: u64) -> QueryProgress {
        QueryProgress {
            id: "q".into(),
            run_id: "r".into(),
            name: "test".into(),
            timestamp: "2026-11-29T08:00:00.000Z".into(),
            batch_id,
            num_input_rows: batch_id * 10,
            sink: SinkProgress { description: "ConsoleSink".into(), num_output_rows: batch_id, ..Default::default() },
            ..Default::default()
        }
    }

    fn parse(words: &[&str]) -> Result<ProgressArgs> {
        Ok(TestCli::try_parse_from(std::iter::once("progress").chain(words.iter().copied()))?.args)
    }

    fn printed(args: &ProgressArgs) -> Result<String> {
        let mut out = Vec::new();
        print_records(args, &mut out)?;
        Ok(String::from_utf8(out)?)
    }

    #[test]
    fn prints_all_records_or_the_last_ones_as_json_lines() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let log = CheckpointDir::new(checkpoint.path()).progress();
        for id in 0..4 {
            log.append(&record(id))?;
        }
        let dir = checkpoint.path().to_string_lossy().into_owned();

        let all = printed(&parse(&[&dir])?)?;
        let lines: Vec<&str> = all.lines().collect();
        assert_eq!(lines.len(), 4);
        for (id, line) in lines.iter().enumerate() {
            assert_eq!(serde_json::from_str::<QueryProgress>(line)?, record(id as u64));
        }
        assert!(lines[0].starts_with("{\"id\":\"q\",\"runId\":\"r\",\"name\":\"test\""), "{}", lines[0]);

        let last = printed(&parse(&[&dir, "--last", "2"])?)?;
        let ids: Vec<u64> = last
            .lines()
            .map(|line| serde_json::from_str::<QueryProgress>(line).map(|r| r.batch_id))
            .collect::<Result<_, _>>()?;
        assert_eq!(ids, vec![2, 3]);
        Ok(())
    }

    #[test]
    fn pretty_prints_indented_records() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        CheckpointDir::new(checkpoint.path()).progress().append(&record(7))?;
        let text = printed(&parse(&[&checkpoint.path().to_string_lossy(), "--pretty"])?)?;
        assert!(text.starts_with("{\n  \"id\": \"q\",\n"), "{text}");
        assert_eq!(serde_json::from_str::<QueryProgress>(&text)?, record(7));
        Ok(())
    }

    #[test]
    fn a_checkpoint_without_progress_is_a_clear_error() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let args = parse(&[&checkpoint.path().to_string_lossy(), "--follow"])?;
        let error = print_records(&args, &mut Vec::new()).err().ok_or_else(|| anyhow::anyhow!("should fail"))?;
        assert_eq!(
            error.to_string(),
            format!(
                "no progress in {}: has the query run with this checkpoint?",
                checkpoint.path().join("progress").display()
            )
        );
        Ok(())
    }

    #[test]
    fn parses_its_options() -> Result<()> {
        let args = parse(&["/cp", "--last", "5", "--follow", "--pretty"])?;
        assert_eq!((args.checkpoint, args.last, args.follow, args.pretty), (PathBuf::from("/cp"), Some(5), true, true));
        assert!(parse(&["/cp", "--last", "many"]).is_err());
        assert!(parse(&[]).is_err());
        Ok(())
    }

    #[test]
    fn a_broken_pipe_is_recognised_through_context() {
        let error = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe)).context("printing");
        assert!(crate::cli::is_broken_pipe(&error));
        assert!(!crate::cli::is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
