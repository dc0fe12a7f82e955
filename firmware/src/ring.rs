//! [`Ring`]: a bounded FIFO of `Copy` values in a fixed array, for the datapath's queues (send
//! queue, retransmission queue, control packets, CSR entries) and the firmware's.
//!
//! What `heapless::Deque` does for these queues, with a head index and a length instead of
//! front/back/full, so the per-packet questions (`is_empty`, `get(i)`) are a compare or an
//! add and a wrap. No `unsafe`: empty slots hold a filler value given at construction.

/// A FIFO of at most `N` values. See the module docs.
#[derive(Clone, Debug)]
pub struct Ring<T: Copy, const N: usize> {
    buf: [T; N],
    head: usize,
    len: usize,
}

impl<T: Copy, const N: usize> Ring<T, N> {
    /// An empty ring; `fill` occupies the unused slots (never returned).
    pub const fn new(fill: T) -> Self {
        Ring {
            buf: [fill; N],
            head: 0,
            len: 0,
        }
    }

    /// Values queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No value queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `N` values queued.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len >= N
    }

    /// Values that can still be queued.
    #[inline]
    pub fn room(&self) -> usize {
        N - self.len
    }

    /// The capacity `N`.
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// `i mod N` for `i < 2 * N`: a mask when `N` is a power of two (then the index is
    /// below `N` with no compare, and the slot's bounds check folds away).
    #[inline]
    fn wrap(i: usize) -> usize {
        if N.is_power_of_two() {
            i & (N - 1)
        } else if i >= N {
            i - N
        } else {
            i
        }
    }

    /// Append `v`.
    ///
    /// # Errors
    /// `v` back when the ring is full.
    #[inline]
    pub fn push_back(&mut self, v: T) -> Result<(), T> {
        if self.len >= N {
            return Err(v);
        }
        let i = Self::wrap(self.head + self.len);
        match self.buf.get_mut(i) {
            Some(s) => {
                *s = v;
                self.len += 1;
                Ok(())
            }
            None => Err(v),
        }
    }

    /// Append the value `make` returns, made in its slot (no copy through the stack when the
    /// compiler can write the value in place). `make` is called also when the ring is full;
    /// its value is then dropped and `false` returned.
    #[inline(always)]
    pub fn push_back_with(&mut self, make: impl FnOnce() -> T) -> bool {
        let i = Self::wrap(self.head + self.len);
        match self.buf.get_mut(i).filter(|_| self.len < N) {
            Some(s) => {
                *s = make();
                self.len += 1;
                true
            }
            None => {
                let _ = make();
                false
            }
        }
    }

    /// Append the value `fill` writes into its slot (the whole value: the slot holds an old
    /// one), with no copy through the stack. `fill` is called also when the ring is full, on
    /// a copy of `scratch`; `false` is then returned.
    #[inline(always)]
    pub fn push_back_in(&mut self, scratch: T, fill: impl FnOnce(&mut T)) -> bool {
        let i = Self::wrap(self.head + self.len);
        match self.buf.get_mut(i).filter(|_| self.len < N) {
            Some(s) => {
                fill(s);
                self.len += 1;
                true
            }
            None => {
                let mut t = scratch;
                fill(&mut t);
                false
            }
        }
    }

    /// Put `v` ahead of every queued value (it is the next [`Self::pop_front`]).
    ///
    /// # Errors
    /// `v` back when the ring is full.
    pub fn push_front(&mut self, v: T) -> Result<(), T> {
        if self.len >= N {
            return Err(v);
        }
        // (`head < N`: `head + N - 1 < 2 * N`, one wrap)
        let i = Self::wrap(self.head + N - 1);
        match self.buf.get_mut(i) {
            Some(s) => {
                *s = v;
                self.head = i;
                self.len += 1;
                Ok(())
            }
            None => Err(v),
        }
    }

    /// Remove and return the oldest value.
    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        // (`head < N`: the wrap changes nothing, but lets a power-of-two ring drop the
        // bounds check)
        let v = self.buf.get(Self::wrap(self.head)).copied()?;
        self.head = Self::wrap(self.head + 1);
        self.len -= 1;
        Some(v)
    }

    /// The oldest value.
    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The `i`-th oldest value.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        // head < N and i < len <= N
        self.buf.get(Self::wrap(self.head + i))
    }

    /// The `i`-th oldest value, mutably.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        self.buf.get_mut(Self::wrap(self.head + i))
    }

    /// The values queued, oldest first, in place: the run from the oldest to the end of the
    /// array, then the run that wrapped to its start (empty unless the values wrap).
    #[inline]
    pub fn as_slices(&self) -> (&[T], &[T]) {
        let end = self.head + self.len;
        if end <= N {
            (self.buf.get(self.head..end).unwrap_or_default(), &[])
        } else {
            (
                self.buf.get(self.head..).unwrap_or_default(),
                self.buf.get(..end - N).unwrap_or_default(),
            )
        }
    }

    /// Drop the `n` oldest values (all of them when fewer are queued).
    #[inline]
    pub fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.head = Self::wrap(self.head + n);
        self.len -= n;
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).filter_map(move |i| self.get(i))
    }

    /// Drop every value.
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    extern crate std;

    /// Same answers as a `VecDeque` bounded at `N`, across wraps.
    fn check_vecdeque<const N: usize>(ops: &[(u8, u16)]) -> Result<(), TestCaseError> {
        let mut r: Ring<u16, N> = Ring::new(0);
        let mut m: VecDeque<u16> = VecDeque::new();
        for &(op, v) in ops {
            match op {
                0 | 1 => {
                    let want = if m.len() < N {
                        m.push_back(v);
                        Ok(())
                    } else {
                        Err(v)
                    };
                    if op == 0 {
                        prop_assert_eq!(r.push_back(v), want);
                    } else {
                        // (written in its slot; on a full ring, on the scratch value)
                        let mut wrote = false;
                        let taken = r.push_back_in(u16::MAX, |s| {
                            *s = v;
                            wrote = true;
                        });
                        prop_assert!(wrote);
                        prop_assert_eq!(taken, want.is_ok());
                    }
                }
                2 => prop_assert_eq!(r.pop_front(), m.pop_front()),
                3 if v % 7 == 2 => {
                    let want = if m.len() < N {
                        m.push_front(v);
                        Ok(())
                    } else {
                        Err(v)
                    };
                    prop_assert_eq!(r.push_front(v), want);
                }
                3 if v % 7 == 1 => {
                    let n = usize::from(v >> 8) % (N + 2);
                    r.drop_front(n);
                    m.drain(..n.min(m.len()));
                }
                _ => {
                    if v % 7 == 0 {
                        r.clear();
                        m.clear();
                    }
                }
            }
            prop_assert_eq!(r.len(), m.len());
            prop_assert_eq!(r.is_empty(), m.is_empty());
            prop_assert_eq!(r.is_full(), m.len() == N);
            prop_assert_eq!(r.front(), m.front());
            for i in 0..N + 1 {
                prop_assert_eq!(r.get(i), m.get(i));
            }
            prop_assert!(r.iter().eq(m.iter()));
            let (a, b) = r.as_slices();
            prop_assert!(a.iter().chain(b).eq(m.iter()));
            prop_assert!(b.is_empty() || a.len() + b.len() == r.len() && !a.is_empty());
        }
        Ok(())
    }

    proptest! {
        /// `N` not a power of two (the index wrapped by a compare).
        #[test]
        fn matches_vecdeque(ops in proptest::collection::vec((0u8..4, any::<u16>()), 1..300)) {
            check_vecdeque::<5>(&ops)?;
        }

        /// `N` a power of two (the index wrapped by a mask).
        #[test]
        fn matches_vecdeque_pow2(ops in proptest::collection::vec((0u8..4, any::<u16>()), 1..300)) {
            check_vecdeque::<4>(&ops)?;
        }
    }
}
