//! Fixed-capacity containers of the admin executor: no allocation, `const` construction, and an
//! all-zero empty state (so a NIC image's `static` of tables lands in `.bss`, not in the
//! initialised `.data` that also occupies the code memory).

use core::ops::{Deref, DerefMut};

/// A value with an all-zero "empty" constant, used to fill unused slots.
pub trait Zero: Copy {
    /// The empty value (all bytes zero for the types of this module).
    const ZERO: Self;
}

impl Zero for () {
    const ZERO: Self = ();
}

/// A vector of at most `N` `Copy` items in place (`Deref`s to the used slice).
#[derive(Clone, Copy, Debug)]
pub struct FixedVec<T: Zero, const N: usize> {
    len: usize,
    items: [T; N],
}

impl<T: Zero, const N: usize> FixedVec<T, N> {
    /// Empty.
    pub const fn new() -> Self {
        FixedVec {
            len: 0,
            items: [T::ZERO; N],
        }
    }

    /// Append; `Err(item)` when full.
    ///
    /// # Errors
    /// The vector holds `N` items.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = item;
                self.len += 1;
                Ok(())
            }
            None => Err(item),
        }
    }
}

impl<T: Zero, const N: usize> Zero for FixedVec<T, N> {
    const ZERO: Self = Self::new();
}

impl<T: Zero, const N: usize> Default for FixedVec<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Zero, const N: usize> Deref for FixedVec<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.items.get(..self.len).unwrap_or_default()
    }
}

impl<T: Zero, const N: usize> DerefMut for FixedVec<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.items.get_mut(..self.len).unwrap_or_default()
    }
}

/// A map from `u32` handles to `V`, at most `N` entries, kept in key order (iteration order is
/// the key order, as with a `BTreeMap`, so whoever walks it is deterministic). Lookups are
/// binary searches; inserts and removals shift (the tables are small).
#[derive(Clone, Copy, Debug)]
pub struct Table<V: Zero, const N: usize> {
    len: usize,
    items: [(u32, V); N],
}

impl<V: Zero, const N: usize> Default for Table<V, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Zero, const N: usize> Table<V, N> {
    /// Empty.
    pub const fn new() -> Self {
        Table {
            len: 0,
            items: [(0, V::ZERO); N],
        }
    }

    fn used(&self) -> &[(u32, V)] {
        self.items.get(..self.len).unwrap_or_default()
    }

    fn find(&self, key: u32) -> Result<usize, usize> {
        self.used().binary_search_by_key(&key, |e| e.0)
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `N` entries: an insert of a new key fails.
    pub fn is_full(&self) -> bool {
        self.len >= N
    }

    /// Capacity.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The value of `key`.
    pub fn get(&self, key: &u32) -> Option<&V> {
        let i = self.find(*key).ok()?;
        self.items.get(i).map(|e| &e.1)
    }

    /// The value of `key`, mutably.
    pub fn get_mut(&mut self, key: &u32) -> Option<&mut V> {
        let i = self.find(*key).ok()?;
        self.items.get_mut(i).map(|e| &mut e.1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &u32) -> bool {
        self.find(*key).is_ok()
    }

    /// Insert or replace: `Ok(previous value)`, or `Err(value)` when the key is new and the
    /// table is full (nothing changes).
    ///
    /// # Errors
    /// The table is full.
    pub fn insert(&mut self, key: u32, value: V) -> Result<Option<V>, V> {
        match self.find(key) {
            Ok(i) => Ok(self
                .items
                .get_mut(i)
                .map(|e| core::mem::replace(&mut e.1, value))),
            Err(i) => {
                if self.len >= N {
                    return Err(value);
                }
                // Shift the tail up one slot (a plain copy loop: `rotate_right` costs a few
                // hundred bytes of code per value type on the NIC core).
                let mut j = self.len;
                while j > i {
                    if let Some(prev) = self.items.get(j - 1).copied() {
                        if let Some(e) = self.items.get_mut(j) {
                            *e = prev;
                        }
                    }
                    j -= 1;
                }
                if let Some(e) = self.items.get_mut(i) {
                    *e = (key, value);
                }
                self.len += 1;
                Ok(None)
            }
        }
    }

    /// Remove `key`, returning its value.
    pub fn remove(&mut self, key: &u32) -> Option<V> {
        let i = self.find(*key).ok()?;
        let v = self.items.get(i).map(|e| e.1)?;
        // Shift the tail down one slot (see `insert`).
        for j in i + 1..self.len {
            if let Some(next) = self.items.get(j).copied() {
                if let Some(e) = self.items.get_mut(j - 1) {
                    *e = next;
                }
            }
        }
        self.len -= 1;
        if let Some(e) = self.items.get_mut(self.len) {
            *e = (0, V::ZERO);
        }
        Some(v)
    }

    /// `(key, value)` pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&u32, &V)> + '_ {
        self.used().iter().map(|(k, v)| (k, v))
    }

    /// `(key, value)` pairs in key order, values mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut V)> + '_ {
        let len = self.len;
        self.items
            .get_mut(..len)
            .unwrap_or_default()
            .iter_mut()
            .map(|(k, v)| (&*k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &u32> + '_ {
        self.used().iter().map(|e| &e.0)
    }

    /// Values in key order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.used().iter().map(|e| &e.1)
    }

    /// Values in key order, mutably.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.iter_mut().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Zero for u8 {
        const ZERO: Self = 0;
    }

    #[test]
    fn table_keeps_key_order_and_capacity() {
        let mut t: Table<u8, 3> = Table::new();
        assert_eq!(t.insert(7, 1), Ok(None));
        assert_eq!(t.insert(2, 2), Ok(None));
        assert_eq!(t.insert(5, 3), Ok(None));
        assert_eq!(t.insert(1, 9), Err(9), "full");
        assert_eq!(t.insert(5, 4), Ok(Some(3)), "replace in a full table");
        let keys: [u32; 3] = core::array::from_fn(|i| *t.keys().nth(i).unwrap());
        assert_eq!(keys, [2, 5, 7]);
        assert_eq!(t.remove(&5), Some(4));
        assert_eq!(t.remove(&5), None);
        assert_eq!(t.get(&7), Some(&1));
        assert!(!t.contains_key(&5));
        assert_eq!(t.insert(6, 6), Ok(None));
        let vals: [u8; 3] = core::array::from_fn(|i| *t.values().nth(i).unwrap());
        assert_eq!(vals, [2, 6, 1]);
        *t.get_mut(&2).unwrap() = 0;
        assert_eq!(t.iter().next(), Some((&2, &0)));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn fixed_vec_stops_at_capacity() {
        let mut v: FixedVec<u8, 2> = FixedVec::new();
        assert_eq!(v.push(1), Ok(()));
        assert_eq!(v.push(2), Ok(()));
        assert_eq!(v.push(3), Err(3));
        assert_eq!(&v[..], &[1, 2]);
        v[1] = 5;
        assert_eq!(v.iter().sum::<u8>(), 6);
    }
}
