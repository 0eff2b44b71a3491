//! Search of a sorted list from where the last search ended: a batch reads and changes
//! its keys in about key order, so the next key is usually at or just past the last.

use std::cmp::Ordering;

/// Where `key` is among `items` (sorted by `key_of`), or where it would go: the item
/// after `hint` is looked at first, then the search gallops from `hint` outwards,
/// doubling the step, and halves the bracket found (a key near the hint costs a few
/// comparisons, one anywhere else about twice a binary search's).
pub(super) fn search<T>(items: &[T], key: &[u8], hint: usize, key_of: impl Fn(&T) -> &[u8]) -> Result<usize, usize> {
    let compare = |at: usize| key_of(&items[at]).cmp(key);
    let Some(last) = items.len().checked_sub(1) else { return Err(0) };
    let hint = hint.min(last);
    let (low, high) = match compare(hint) {
        Ordering::Equal => return Ok(hint),
        Ordering::Less => {
            // Most often the very next key.
            match (hint < last).then(|| compare(hint + 1)) {
                Some(Ordering::Less) => {}
                Some(Ordering::Equal) => return Ok(hint + 1),
                Some(Ordering::Greater) | None => return Err(hint + 1),
            }
            let (mut low, mut step) = (hint + 2, 1);
            while low + step <= last && compare(low + step) == Ordering::Less {
                low += step + 1;
                step *= 2;
            }
            (low, (low + step + 1).min(items.len()))
        }
        Ordering::Greater => {
            let (mut high, mut step) = (hint, 1);
            while high >= step && compare(high - step) == Ordering::Greater {
                high -= step;
                step *= 2;
            }
            (high.saturating_sub(step), high)
        }
    };
    match items[low..high].binary_search_by(|item| key_of(item).cmp(key)) {
        Ok(at) => Ok(low + at),
        Err(at) => Err(low + at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_from_any_hint_finds_a_key_or_its_place() {
        let items: Vec<[u8; 4]> = (0..100u32).map(|k| (k * 2).to_be_bytes()).collect();
        for hint in [0, 1, 37, 98, 99, 500] {
            for k in 0..205u32 {
                let want = items.binary_search_by(|item| item[..].cmp(&k.to_be_bytes()[..]));
                assert_eq!(search(&items, &k.to_be_bytes(), hint, |item| &item[..]), want, "key {k} from {hint}");
            }
        }
        assert_eq!(search(&[] as &[[u8; 4]], b"k", 3, |item| &item[..]), Err(0));
    }
}
