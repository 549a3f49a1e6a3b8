//! [`SortedMap`]: a map kept as a vector sorted by key, of its exact length.
//!
//! For the small maps kept per module for the whole run (a state identity's fields, map
//! and object values, a module's locals and variables): a `BTreeMap` allocates a node
//! with room for eleven entries (500-700 bytes) for one or two. Order, lookup, equality,
//! comparison and hash are a `BTreeMap`'s of the same entries. Building stays
//! `O(n log n)`: [`FromIterator`] sorts once, and [`SortedMap::insert`] in key order
//! appends (out of order it shifts the entries after it: for small maps, or maps built
//! in key order).

use std::borrow::Borrow;
use std::collections::BTreeMap;

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SortedMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap(Vec::new())
    }
}

impl<K: Ord, V> SortedMap<K, V> {
    pub const fn new() -> Self {
        SortedMap(Vec::new())
    }

    /// From entries already in strictly increasing key order (a `BTreeMap`'s).
    pub(crate) fn from_sorted(entries: impl IntoIterator<Item = (K, V)>) -> Self {
        let entries: Vec<(K, V)> = entries.into_iter().collect();
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        SortedMap(entries)
    }

    fn position<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.0.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.position(key).ok().map(|i| &mut self.0[i].1)
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the value it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if self.0.last().is_none_or(|(last, _)| *last < key) {
            self.0.push((key, value));
            return None;
        }
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.position(key).ok().map(|i| self.0.remove(i).1)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&K, &mut V)> + ExactSizeIterator {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, v)| v)
    }

    pub fn into_values(self) -> impl DoubleEndedIterator<Item = V> + ExactSizeIterator {
        self.0.into_iter().map(|(_, v)| v)
    }

    pub fn into_keys(self) -> impl DoubleEndedIterator<Item = K> + ExactSizeIterator {
        self.0.into_iter().map(|(k, _)| k)
    }

    /// Drops growth slack: the map is kept as it is from here on.
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedMap<K, V> {
    /// The last value given for a key wins, as with a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(K, V)> = iter.into_iter().collect();
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable: equal keys stay in the order given, and the last one is kept.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut kept: Vec<(K, V)> = Vec::with_capacity(entries.len());
            for entry in entries {
                match kept.last_mut() {
                    Some(last) if last.0 == entry.0 => *last = entry,
                    _ => kept.push(entry),
                }
            }
            entries = kept;
        }
        entries.shrink_to_fit();
        SortedMap(entries)
    }
}

impl<K: Ord, V> Extend<(K, V)> for SortedMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        let mut all = std::mem::take(&mut self.0);
        let before = all.len();
        all.extend(iter);
        if all.len() == before {
            self.0 = all;
            return;
        }
        *self = all.into_iter().collect();
    }
}

impl<K: Ord, V, const N: usize> From<[(K, V); N]> for SortedMap<K, V> {
    fn from(entries: [(K, V); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl<K: Ord, V> From<BTreeMap<K, V>> for SortedMap<K, V> {
    fn from(map: BTreeMap<K, V>) -> Self {
        SortedMap::from_sorted(map)
    }
}

impl<K, V> IntoIterator for SortedMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// What iterating a borrowed [`SortedMap`] gives: key and value, in key order.
pub(crate) type Iter<'a, K, V> =
    std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

impl<'a, K, V> IntoIterator for &'a SortedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for SortedMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_key_order_and_compare_as_a_map_of_them_would() {
        let mut a: SortedMap<&'static str, String> = SortedMap::default();
        for (k, v) in [
            ("region", "eu"),
            ("bucket", "b"),
            ("key", "k"),
            ("bucket", "c"),
        ] {
            a.insert(k, v.to_owned());
        }
        let map: BTreeMap<&str, String> = [("bucket", "c"), ("key", "k"), ("region", "eu")]
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
        assert_eq!(a.iter().collect::<Vec<_>>(), map.iter().collect::<Vec<_>>());
        assert_eq!(a.get("key").map(String::as_str), Some("k"));
        assert_eq!(a.get("path"), None);
        assert_eq!(format!("{a:?}"), format!("{map:?}"));
        let mut b = SortedMap::default();
        b.insert("bucket", "c".to_owned());
        b.insert("key", "l".to_owned());
        // As for the maps: entry by entry, in key order.
        assert_eq!(a.cmp(&b), std::cmp::Ordering::Less);
    }

    #[test]
    fn a_map_from_a_btree_map_is_in_key_order_and_of_its_exact_length() {
        let map: BTreeMap<String, u32> = [("zone", 1), ("app", 2), ("env", 4)]
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v))
            .collect();
        let by = SortedMap::from(map);
        let entries: Vec<(&str, u32)> = by.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        assert_eq!(entries, [("app", 2), ("env", 4), ("zone", 1)]);
        assert_eq!(by.get("zone"), Some(&1));
        assert_eq!(by.get("app"), Some(&2));
        assert_eq!(by.get("region"), None);
        assert!(by.contains_key("env"));
        assert_eq!(by.0.capacity(), 3);
        let one = SortedMap::from(BTreeMap::from([("env".to_owned(), 1)]));
        assert_eq!(one.0.capacity(), 1);
    }
}
