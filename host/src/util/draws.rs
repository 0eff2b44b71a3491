//! A small deterministic pseudo-random sequence for tests (xorshift64): the same
//! draws every run, so a failure can be replayed.

/// The sequence, from its seed (not 0).
pub struct Draws(pub u64);

impl Draws {
    /// The next draw, below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
