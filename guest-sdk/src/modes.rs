//! The modes a processor declares: how it reasons about time, and what the sink
//! does with its rows. A leaf: the context, the store and the timers all use them.

/// How the processor reasons about time; fixes the domain of its timers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeMode {
    /// No timers.
    #[default]
    None,
    /// Timers fire when a batch's processing time reaches them.
    ProcessingTime,
    /// Timers fire when the watermark reaches them.
    EventTime,
}

/// What the sink does with the rows a processor returns (Spark's output modes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputMode {
    /// Rows are final once returned; they are only ever added.
    #[default]
    Append,
    /// Rows are the new version of a result for their key.
    Update,
    /// Every trigger outputs the whole result.
    Complete,
}
