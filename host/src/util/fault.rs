//! Fault injection for crash tests: a named point of the batch protocol waits the
//! milliseconds its environment variable says, so that a test's kill -9 lands there.
//! The points: `EDDY_PAUSE_IN_TRANSACTION_MS` (a Kafka sink's records delivered, its
//! transaction still open), `EDDY_PAUSE_BEFORE_MANIFEST_MS` (the sink wrote the batch,
//! its manifest does not record it yet: the next run writes it again over what is
//! written), `EDDY_PAUSE_AFTER_PUBLISH_MS` (output published, state not committed).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Waits as long as the environment variable `name` says (read once per name), if set.
pub fn pause(name: &'static str) {
    static PAUSES: Mutex<Option<HashMap<&'static str, Option<Duration>>>> = Mutex::new(None);
    let pause = {
        let mut pauses = PAUSES.lock().unwrap_or_else(|poison| poison.into_inner());
        *pauses.get_or_insert_with(HashMap::new).entry(name).or_insert_with(|| {
            let ms = std::env::var(name).ok()?.parse().ok()?;
            Some(Duration::from_millis(ms))
        })
    };
    if let Some(pause) = pause {
        std::thread::sleep(pause);
    }
}
