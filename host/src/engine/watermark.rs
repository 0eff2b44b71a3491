//! Event time: each source's watermark is the largest event time it has seen minus
//! its delay; the query watermark is the minimum over the sources that have seen
//! event time (option: the maximum), never moving backwards. It is computed at the
//! end of batch N and used by batch N+1, and kept in the store with each commit.

use anyhow::Result;

use crate::pipeline::{SourceSpec, WatermarkPolicy};
use crate::state::{Cf, StateStore};

const CURRENT: &[u8] = b"engine/watermark";

/// The watermark state of a query.
#[derive(Clone, Debug, PartialEq)]
pub struct WatermarkTracker {
    delays: Vec<Option<i64>>,
    max_event_time: Vec<Option<i64>>,
    policy: WatermarkPolicy,
    current: Option<i64>,
}

fn max_key(source: usize) -> Vec<u8> {
    format!("engine/max-event-time/{source}").into_bytes()
}

fn read_i64(store: &StateStore, key: &[u8]) -> Result<Option<i64>> {
    Ok(store.read(Cf::Meta, key)?.and_then(|raw| Some(i64::from_be_bytes(raw.as_slice().try_into().ok()?))))
}

impl WatermarkTracker {
    /// The committed watermark state of `sources` in `store`.
    pub fn load(store: &StateStore, sources: &[SourceSpec], policy: WatermarkPolicy) -> Result<Self> {
        let delays: Vec<Option<i64>> = sources.iter().map(|s| s.watermark.as_ref().map(|w| w.delay_us)).collect();
        let max_event_time = (0..sources.len()).map(|i| read_i64(store, &max_key(i))).collect::<Result<_>>()?;
        Ok(Self { delays, max_event_time, policy, current: read_i64(store, CURRENT)? })
    }

    /// Whether any source has a watermark.
    pub fn enabled(&self) -> bool {
        self.delays.iter().any(Option::is_some)
    }

    /// The watermark in force for the next batch.
    pub fn current(&self) -> Option<i64> {
        self.current
    }

    /// Notes the largest event time of a batch of source `index`.
    pub fn observe(&mut self, index: usize, max_event_time: i64) {
        let seen = &mut self.max_event_time[index];
        *seen = Some(seen.map_or(max_event_time, |previous| previous.max(max_event_time)));
    }

    /// Recomputes the watermark from what was observed (called at the end of a batch).
    pub fn advance(&mut self) {
        let per_source = self
            .delays
            .iter()
            .zip(&self.max_event_time)
            .filter_map(|(delay, max)| Some(max.as_ref()?.saturating_sub((*delay)?)));
        let combined = match self.policy {
            WatermarkPolicy::Min => per_source.min(),
            WatermarkPolicy::Max => per_source.max(),
        };
        if let Some(candidate) = combined {
            self.current = Some(self.current.map_or(candidate, |current| current.max(candidate)));
        }
    }

    /// The meta entries that store this state with a batch's commit.
    pub fn commit_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = self
            .max_event_time
            .iter()
            .enumerate()
            .filter_map(|(i, max)| Some((max_key(i), max.as_ref()?.to_be_bytes().to_vec())))
            .collect();
        if let Some(current) = self.current {
            entries.push((CURRENT.to_vec(), current.to_be_bytes().to_vec()));
        }
        entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(delays: &[Option<i64>], policy: WatermarkPolicy) -> WatermarkTracker {
        WatermarkTracker { delays: delays.to_vec(), max_event_time: vec![None; delays.len()], policy, current: None }
    }

    #[test]
    fn the_slowest_source_holds_the_watermark_back() {
        let mut t = tracker(&[Some(10), Some(5)], WatermarkPolicy::Min);
        t.observe(0, 100);
        t.advance();
        assert_eq!(t.current(), Some(90), "only sources that have seen event time count");
        t.observe(1, 50);
        t.advance();
        assert_eq!(t.current(), Some(90), "never backwards");
        t.observe(1, 200);
        t.observe(0, 120);
        t.advance();
        assert_eq!(t.current(), Some(110));
    }

    #[test]
    fn the_max_policy_follows_the_fastest_source() {
        let mut t = tracker(&[Some(10), Some(5)], WatermarkPolicy::Max);
        t.observe(0, 100);
        t.observe(1, 200);
        t.advance();
        assert_eq!(t.current(), Some(195));
    }
}
