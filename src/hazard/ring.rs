//! A fixed ring of the last `N` values, oldest first: the history a track or the attitude keeps
//! without allocating once made.

/// The last `N` values pushed.
#[derive(Clone, Copy, Debug)]
pub struct Ring<T: Copy + Default, const N: usize> {
    items: [T; N],
    start: usize,
    len: usize,
}

impl<T: Copy + Default, const N: usize> Default for Ring<T, N> {
    fn default() -> Self {
        Ring { items: [T::default(); N], start: 0, len: 0 }
    }
}

impl<T: Copy + Default, const N: usize> Ring<T, N> {
    /// Adds `item`, dropping the oldest when full.
    pub fn push(&mut self, item: T) {
        if self.len == N {
            self.items[self.start] = item;
            self.start = (self.start + 1) % N;
        } else {
            self.items[(self.start + self.len) % N] = item;
            self.len += 1;
        }
    }

    /// The values, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = T> + Clone + '_ {
        (0..self.len).map(move |i| self.items[(self.start + i) % N])
    }

    /// The newest value.
    pub fn last(&self) -> Option<T> {
        self.len.checked_sub(1).map(|i| self.items[(self.start + i) % N])
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True before the first push.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every value.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_n_oldest_first() {
        let mut r = Ring::<u32, 3>::default();
        assert!(r.is_empty() && r.last().is_none());
        for v in 1..=5 {
            r.push(v);
        }
        assert_eq!(r.iter().collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!((r.len(), r.last()), (3, Some(5)));
        r.clear();
        r.push(9);
        assert_eq!(r.iter().collect::<Vec<_>>(), [9]);
    }
}
