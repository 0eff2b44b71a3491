//! Progress: a record per batch with the field names of Spark's
//! `StreamingQueryProgress`, kept in `<checkpoint>/progress/<batchId>.json` and read
//! by `eddy progress`; ids for queries and runs; a terminal progress bar.

mod bar;
mod log_dir;
mod record;
mod time;
mod uuid;

pub use bar::{Bar, render as render_bar};
pub use log_dir::{FOLLOW_POLL, Follower, PROGRESS_DIR, ProgressLog};
pub use record::{
    EventTimeProgress, QueryProgress, SinkProgress, SourceProgress, StateOperatorProgress, rows_per_second,
};
pub use time::{format_micros_iso, now_micros};
pub use uuid::{format_uuid_v4, new_uuid_v4};
