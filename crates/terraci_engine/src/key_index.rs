//! A hash index over the keys of a loaded cache's entries, which live in the cache's one
//! blob: a run of 30,000 lookups by path costs one hash and, almost always, one
//! comparison each, where a binary search compared about fifteen long paths sharing
//! their prefixes. The index holds positions only; the keys stay in the blob.

use std::hash::Hasher as _;

/// Open addressing with linear probing over a table at most half full; a slot holds an
/// entry's position plus one (zero is empty).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyIndex {
    slots: Vec<u32>,
}

fn hash(key: &[u8]) -> usize {
    let mut h = rustc_hash::FxHasher::default();
    h.write(key);
    h.finish() as usize
}

impl KeyIndex {
    /// The index of `keys`, the entries' keys in their order (distinct: the caches
    /// refuse a file whose keys are not strictly sorted).
    pub(crate) fn new<'a>(keys: impl ExactSizeIterator<Item = &'a [u8]>) -> Self {
        let len = keys.len();
        if len == 0 || u32::try_from(len).is_err() {
            return KeyIndex::default();
        }
        let mut slots = vec![0u32; (len * 2).next_power_of_two()];
        let mask = slots.len() - 1;
        for (i, key) in keys.enumerate() {
            let mut at = hash(key) & mask;
            while slots[at] != 0 {
                at = (at + 1) & mask;
            }
            slots[at] = i as u32 + 1;
        }
        KeyIndex { slots }
    }

    /// The position among `len` entries of the one whose key (`key_of` a position) is
    /// `key`. An index made of more keys than a `u32` counts holds none: the sorted
    /// keys are searched then.
    pub(crate) fn find<'a>(
        &self,
        key: &[u8],
        len: usize,
        key_of: impl Fn(usize) -> &'a [u8],
    ) -> Option<usize> {
        if self.slots.is_empty() {
            let (mut lo, mut hi) = (0, len);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match key_of(mid).cmp(key) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return Some(mid),
                }
            }
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = hash(key) & mask;
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                return None;
            }
            let i = slot as usize - 1;
            if key_of(i) == key {
                return Some(i);
            }
            at = (at + 1) & mask;
        }
    }
}

/// [`KeyIndex::find`], trying first the position after the one found last through
/// `next` (a caller's thread-local): callers that ask in key order, as discovery asks
/// for a directory's files and a chunk for its modules, find most keys beside the
/// memory they just read.
pub(crate) fn find_near<'a>(
    index: &KeyIndex,
    next: &'static std::thread::LocalKey<std::cell::Cell<usize>>,
    key: &[u8],
    len: usize,
    key_of: impl Fn(usize) -> &'a [u8],
) -> Option<usize> {
    let at = next.get();
    let found = if at < len && key_of(at) == key {
        at
    } else {
        index.find(key, len, key_of)?
    };
    next.set(found + 1);
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_found_at_its_position_and_no_other_key_is() {
        let keys: Vec<String> = (0..1000)
            .map(|i| format!("svc/env/mod{i:04}/main.tf"))
            .collect();
        let index = KeyIndex::new(keys.iter().map(|k| k.as_bytes()));
        for (i, key) in keys.iter().enumerate() {
            let found = index.find(key.as_bytes(), keys.len(), |j| keys[j].as_bytes());
            assert_eq!(found, Some(i));
        }
        for absent in ["", "svc/env/mod1000/main.tf", "svc/env/mod0001/main.t"] {
            let found = index.find(absent.as_bytes(), keys.len(), |j| keys[j].as_bytes());
            assert_eq!(found, None);
        }
        let empty = KeyIndex::new(std::iter::empty());
        assert_eq!(empty.find(b"a", 0, |_| b"a"), None);
        // An index holding no keys (too many to count) searches the sorted keys.
        let found = empty.find(keys[7].as_bytes(), keys.len(), |j| keys[j].as_bytes());
        assert_eq!(found, Some(7));
    }

    #[test]
    fn a_search_near_the_last_key_found_finds_keys_in_any_order() {
        thread_local!(static NEXT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });
        let keys = ["a/backend.tf", "a/main.tf", "b/main.tf", "c/main.tf"];
        let index = KeyIndex::new(keys.iter().map(|k| k.as_bytes()));
        let near = |key: &str| find_near(&index, &NEXT, key.as_bytes(), 4, |j| keys[j].as_bytes());
        for (key, at) in [("a/backend.tf", 0), ("a/main.tf", 1), ("c/main.tf", 3)] {
            assert_eq!(near(key), Some(at));
        }
        // After the last key, and out of order: found through the index.
        assert_eq!(near("b/main.tf"), Some(2));
        assert_eq!(near("a/main.tf"), Some(1));
        assert_eq!(near("b/main.tf"), Some(2));
        assert_eq!(near("b/other.tf"), None);
    }
}
