//! A commit's state changes on their way to the in-memory copy of the state
//! ([`resident`](super::resident)): a thread makes them in the copy while the commit
//! builds its write batch.

use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};

use super::resident::{ResidentChange, ResidentState};

/// How many changes go to the copy's thread at a time.
const FEED_CHUNK: usize = 4096;

/// How many chunks of changes may wait for the copy's thread: enough that the commit
/// does not wait for it while building the write batch (the thread then catches up
/// while RocksDB writes), few enough that changes in flight stay a small share of the
/// batch's memory.
const FEED_CHUNKS_IN_FLIGHT: usize = 32;

/// Hands a commit's state changes, in order, to a thread that makes them in the
/// copy while the commit goes on (so the changes need not be held until the end).
pub struct ResidentFeed {
    sender: Option<SyncSender<Vec<ResidentChange>>>,
    pending: Vec<ResidentChange>,
}

impl ResidentFeed {
    /// A feed of no copy.
    pub fn none() -> Self {
        ResidentFeed { sender: None, pending: Vec::new() }
    }

    /// Starts the thread that changes `copy` (none without a copy); joined, it
    /// returns the copy with every change fed before [`finish`](Self::finish), or
    /// `None` once the copy outgrew its budget (dropped right then, not at the end).
    pub fn start<'scope>(
        scope: &'scope Scope<'scope, '_>,
        copy: Option<ResidentState>,
    ) -> (Self, Option<ScopedJoinHandle<'scope, Option<ResidentState>>>) {
        let Some(copy) = copy else { return (ResidentFeed::none(), None) };
        let (sender, receiver) = sync_channel::<Vec<ResidentChange>>(FEED_CHUNKS_IN_FLIGHT);
        let applier = scope.spawn(move || {
            let mut copy = Some(copy);
            for changes in receiver {
                let Some(held) = copy.as_mut() else { continue };
                held.apply(changes);
                if held.over_budget() {
                    crate::log::info(&format!(
                        "the state outgrew its in-memory copy's budget (state-in-memory, {} bytes): state reads \
                         go to RocksDB",
                        held.budget()
                    ));
                    copy = None;
                }
            }
            if let Some(held) = copy.as_mut() {
                held.settle();
            }
            copy
        });
        (ResidentFeed { sender: Some(sender), pending: Vec::with_capacity(FEED_CHUNK) }, Some(applier))
    }

    /// Whether there is a copy to change.
    pub fn is_fed(&self) -> bool {
        self.sender.is_some()
    }

    /// Feeds the next change.
    pub fn push(&mut self, change: ResidentChange) {
        self.pending.push(change);
        if self.pending.len() >= FEED_CHUNK {
            self.send();
        }
    }

    /// Feeds what is pending and ends the feed.
    pub fn finish(&mut self) {
        self.send();
        self.sender = None;
    }

    fn send(&mut self) {
        if let Some(sender) = &self.sender {
            let changes = std::mem::replace(&mut self.pending, Vec::with_capacity(FEED_CHUNK));
            // The thread ended early only by a panic: its copy is not put back.
            if sender.send(changes).is_err() {
                self.sender = None;
            }
        }
    }
}
