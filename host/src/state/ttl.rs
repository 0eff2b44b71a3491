//! Evicting expired state: every write of a TTL'd entry is indexed by its expiry, and
//! each batch removes the entries whose expiry is at or before its processing time.
//! (Reads already hide them; eviction reclaims the space.)

use std::ops::Range;

use anyhow::Result;

use super::layout::{self, prefix_end, split_key_prefix, split_ttl_index_key};
use super::store::{Cf, StateTxn};
use super::variables::{StateKind, live_list};

/// Removes every entry of `operator` in `key_groups` that expired at or before `now`;
/// returns how many values, list elements and map entries were removed.
pub fn evict_expired(txn: &mut StateTxn, operator: u16, key_groups: &Range<u16>, now: i64) -> Result<u64> {
    let start = operator.to_be_bytes();
    let end = match now.checked_add(1) {
        Some(bound) => {
            let mut end = start.to_vec();
            end.extend_from_slice(&layout::sortable_i64(bound));
            Some(end)
        }
        None => prefix_end(&start),
    };
    let mut removed = 0;
    for (index_key, _) in txn.scan_range(Cf::TtlIndex, &start, end.as_deref())? {
        let Some((_, kind, state_key)) = split_ttl_index_key(&index_key) else { continue };
        let Some((_, key_group, _, _)) = split_key_prefix(state_key) else { continue };
        if !key_groups.contains(&key_group) {
            continue;
        }
        let state_key = state_key.to_vec();
        txn.delete(Cf::TtlIndex, index_key);
        let Some(raw) = txn.get(Cf::State, &state_key)? else { continue };
        if kind == StateKind::List as u8 {
            let before = layout::decode_list(&raw).map_or(0, |elements| elements.len());
            let live = live_list(&raw, now)?;
            removed += (before - live.len()) as u64;
            if live.is_empty() {
                txn.delete(Cf::State, state_key);
            } else if live.len() < before {
                txn.put(Cf::State, state_key, layout::encode_list(live.iter().map(|(e, p)| (*e, p.as_slice()))));
            }
        } else if layout::unstamp(&raw).is_some_and(|(expiry, _)| expiry <= now) {
            txn.delete(Cf::State, state_key);
            removed += 1;
        }
    }
    Ok(removed)
}
