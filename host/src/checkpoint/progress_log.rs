//! The progress log: `<checkpoint>/progress/<batchId>.json`, one pretty-printed
//! progress record per batch, each written atomically so that a reader (`eddy
//! progress --follow`) never sees half a record.

use std::ops::ControlFlow;
use std::time::Duration;

use anyhow::{Context, Result};

use super::progress_record::QueryProgress;
use super::record_log::RecordLog;

/// How often a follower looks for new records.
pub const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// The progress records of one checkpoint.
#[derive(Clone, Debug)]
pub struct ProgressLog {
    log: RecordLog,
}

impl ProgressLog {
    pub(super) fn new(log: RecordLog) -> Self {
        Self { log }
    }

    /// The records underneath.
    pub fn log(&self) -> &RecordLog {
        &self.log
    }

    /// The log of an existing checkpoint, for reading; an error if the query never
    /// wrote progress there.
    pub fn open_existing(self) -> Result<Self> {
        if !self.log.dir().is_dir() {
            anyhow::bail!("no progress in {}: has the query run with this checkpoint?", self.log.dir().display());
        }
        Ok(self)
    }

    /// Writes `record` as its batch's file (atomically; a replayed batch replaces it).
    pub fn append(&self, record: &QueryProgress) -> Result<()> {
        self.log
            .write(record.batch_id, record)
            .with_context(|| format!("cannot write the progress of batch {}", record.batch_id))
    }

    /// The batch ids that have a record, in order (none if the directory is missing).
    pub fn batch_ids(&self) -> Result<Vec<u64>> {
        self.log.ids()
    }

    /// The record of batch `batch_id`.
    pub fn read(&self, batch_id: u64) -> Result<QueryProgress> {
        self.log.read(batch_id)?.with_context(|| format!("cannot read {}", self.log.path_of(batch_id).display()))
    }

    /// The last `n` records, in batch order.
    pub fn last(&self, n: usize) -> Result<Vec<QueryProgress>> {
        let ids = self.batch_ids()?;
        ids[ids.len().saturating_sub(n)..].iter().map(|&id| self.read(id)).collect()
    }

    /// Every record, in batch order.
    pub fn all(&self) -> Result<Vec<QueryProgress>> {
        self.last(usize::MAX)
    }

    /// A follower that yields the records of batches after `after` (all if `None`).
    pub fn follower(&self, after: Option<u64>) -> Follower {
        Follower { log: self.clone(), after }
    }
}

/// Reads a progress log's new records as the query appends them.
#[derive(Clone, Debug)]
pub struct Follower {
    log: ProgressLog,
    after: Option<u64>,
}

impl Follower {
    /// The records of batches after the last one seen, in order (each batch once).
    pub fn poll(&mut self) -> Result<Vec<QueryProgress>> {
        let mut records = Vec::new();
        for id in self.log.batch_ids()? {
            if self.after.is_some_and(|after| id <= after) {
                continue;
            }
            match self.log.read(id) {
                Ok(record) => records.push(record),
                // Deleted by `retain_last` between the listing and the read.
                Err(_) if !self.log.log.has(id) => continue,
                Err(e) => return Err(e),
            }
            self.after = Some(id);
        }
        Ok(records)
    }

    /// Hands each new record to `each` as it appears, polling every [`FOLLOW_POLL`],
    /// until `each` breaks or fails.
    pub fn follow(&mut self, mut each: impl FnMut(&QueryProgress) -> Result<ControlFlow<()>>) -> Result<()> {
        loop {
            for record in self.poll()? {
                if each(&record)?.is_break() {
                    return Ok(());
                }
            }
            std::thread::sleep(FOLLOW_POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::CheckpointDir;
    use super::super::progress_record::tests::sample;
    use super::*;

    #[test]
    fn appends_pretty_records_and_reads_the_last_ones_in_batch_order() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let log = CheckpointDir::new(checkpoint.path()).progress();
        assert!(log.batch_ids()?.is_empty());
        for id in [2, 0, 10, 1, 9] {
            log.append(&sample(id))?;
        }
        std::fs::write(log.log().dir().join("notes.txt"), "not a record")?;
        std::fs::write(log.log().dir().join(".3.json.123-0.tmp"), "{")?;
        assert_eq!(log.batch_ids()?, vec![0, 1, 2, 9, 10]);
        let ids = |records: Vec<QueryProgress>| records.iter().map(|r| r.batch_id).collect::<Vec<_>>();
        assert_eq!(ids(log.last(3)?), vec![2, 9, 10]);
        assert_eq!(ids(log.last(100)?), vec![0, 1, 2, 9, 10]);
        assert_eq!(ids(log.all()?), vec![0, 1, 2, 9, 10]);
        assert!(log.last(0)?.is_empty());
        assert_eq!(log.read(9)?, sample(9));

        let text = std::fs::read_to_string(checkpoint.path().join("progress/10.json"))?;
        assert!(text.starts_with("{\n  \"id\": "), "{text}");
        assert!(text.contains("\n  \"batchId\": 10,\n"), "{text}");
        assert!(text.ends_with("}\n"));
        Ok(())
    }

    #[test]
    fn a_replayed_batch_replaces_its_record() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let log = CheckpointDir::new(checkpoint.path()).progress();
        log.append(&sample(4))?;
        let mut replay = sample(4);
        replay.run_id = "another-run".into();
        log.append(&replay)?;
        assert_eq!(log.all()?, vec![replay]);
        Ok(())
    }

    #[test]
    fn opening_a_checkpoint_without_progress_says_so() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let error = CheckpointDir::new(checkpoint.path().join("nowhere"))
            .progress()
            .open_existing()
            .err()
            .ok_or_else(|| anyhow::anyhow!("should fail"))?;
        let expected = format!(
            "no progress in {}: has the query run with this checkpoint?",
            checkpoint.path().join("nowhere/progress").display()
        );
        assert_eq!(error.to_string(), expected);
        CheckpointDir::new(checkpoint.path()).progress().append(&sample(0))?;
        assert_eq!(CheckpointDir::new(checkpoint.path()).progress().open_existing()?.batch_ids()?, vec![0]);
        Ok(())
    }

    #[test]
    fn a_corrupt_record_is_named() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let log = CheckpointDir::new(checkpoint.path()).progress();
        std::fs::create_dir_all(log.log().dir())?;
        std::fs::write(log.log().path_of(5), "{ not json")?;
        let error = format!("{:#}", log.read(5).err().ok_or_else(|| anyhow::anyhow!("should fail"))?);
        assert!(error.contains("5.json is not a progress record"), "{error}");
        Ok(())
    }

    #[test]
    fn a_follower_yields_each_new_batch_once() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let log = CheckpointDir::new(checkpoint.path()).progress();
        let mut follower = log.follower(None);
        assert!(follower.poll()?.is_empty());
        log.append(&sample(0))?;
        log.append(&sample(1))?;
        assert_eq!(follower.poll()?.iter().map(|r| r.batch_id).collect::<Vec<_>>(), vec![0, 1]);
        assert!(follower.poll()?.is_empty());
        log.append(&sample(1))?;
        log.append(&sample(2))?;
        assert_eq!(follower.poll()?.iter().map(|r| r.batch_id).collect::<Vec<_>>(), vec![2]);
        let mut later = log.follower(Some(1));
        assert_eq!(later.poll()?.iter().map(|r| r.batch_id).collect::<Vec<_>>(), vec![2]);
        Ok(())
    }

    #[test]
    fn following_sees_records_written_while_it_waits() -> Result<()> {
        let checkpoint = tempfile::tempdir()?;
        let log = CheckpointDir::new(checkpoint.path()).progress();
        log.append(&sample(0))?;
        let writer = {
            let log = log.clone();
            std::thread::spawn(move || -> Result<()> {
                for id in 1..3 {
                    std::thread::sleep(Duration::from_millis(150));
                    log.append(&sample(id))?;
                }
                Ok(())
            })
        };
        let started = Instant::now();
        let mut seen = Vec::new();
        log.follower(None).follow(|record| {
            seen.push(record.batch_id);
            anyhow::ensure!(started.elapsed() < Duration::from_secs(10), "the follower waited too long");
            Ok(if seen.len() == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
        })?;
        writer.join().map_err(|_| anyhow::anyhow!("the writer panicked"))??;
        assert_eq!(seen, vec![0, 1, 2]);
        Ok(())
    }
}
