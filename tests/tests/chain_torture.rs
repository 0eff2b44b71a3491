//! kill -9 torture of a chain of built-in stages — SQL → dedup → window — over many
//! one-file batches: killed at random points and restarted, its output and state must
//! equal an uninterrupted run's. `EDDY_CHAIN_TORTURE_FILES`, `…_KILLS` and `…_SEED`
//! make it a longer soak.

use std::path::Path;

use eddy_tests::torture::{Outcome, Tortured, torture};
use eddy_tests::{Rng, env_or};

struct Chain;

impl Tortured for Chain {
    fn write_spec(&self, dir: &Path) {
        let spec = "[[source]]\nformat = \"json\"\npath = \"input\"\nmax-files-per-trigger = 1\n\
             schema = \"user STRING, amount BIGINT, ts TIMESTAMP\"\n\
             watermark = { column = \"ts\", delay = \"5 seconds\" }\n\n\
             [[stage]]\nname = \"clean\"\nsql = \"SELECT user, amount * 10 AS amount, ts FROM input WHERE amount >= 0\"\n\n\
             [[stage]]\nname = \"dedup\"\n[stage.dedup]\nkey = [\"user\", \"ts\"]\n\n\
             [[stage]]\nname = \"per-user\"\n[stage.window]\ntime-column = \"ts\"\nsize = \"10 seconds\"\n\
             group-by = [\"user\"]\naggregates = [\"count\", \"sum(amount)\", \"min(amount)\", \"max(amount)\"]\n\n\
             [sink]\nformat = \"json\"\npath = \"out\"\n\n[trigger]\navailable-now = true\n";
        std::fs::write(dir.join("pipeline.toml"), spec).expect("spec");
    }

    /// File i: second i's rows for four users, a duplicate of one, a negative amount
    /// (filtered by SQL) and, every 7th file, a row from 3 s earlier.
    fn write_inputs(&self, input: &Path, from: u64, to: u64) {
        for i in from..to {
            let ts = 1_800_000_000_000_000 + i as i64 * 1_000_000;
            let row = |user: String, amount: i64, ts: i64| {
                format!("{{\"user\":\"{user}\",\"amount\":{amount},\"ts\":{ts}}}\n")
            };
            let mut lines: String =
                (0..4).map(|u| row(format!("u{}", (i + u) % 9), (i * 7 + u) as i64 % 50, ts)).collect();
            lines += &row(format!("u{}", i % 9), 1, ts);
            lines += &row("u0".to_string(), -1, ts);
            if i % 7 == 0 {
                lines += &row(format!("u{}", i % 5), 3, ts - 3_000_000);
            }
            std::fs::write(input.join(format!("batch-{i:06}.jsonl")), lines).expect("input file");
        }
    }
}

#[test]
fn kill_9_in_a_chain_of_stages_loses_and_duplicates_nothing() {
    let files = env_or("EDDY_CHAIN_TORTURE_FILES", 2_000);
    let min_kills = env_or("EDDY_CHAIN_TORTURE_KILLS", 30);
    let mut rng = Rng(env_or("EDDY_CHAIN_TORTURE_SEED", 0xc4a1));
    let Outcome { expected, kills, .. } = torture(&Chain, files, min_kills, &mut rng);
    let windows: usize = expected.values().map(|text| text.lines().count()).sum();
    // 10-second windows of 9 users over `files` seconds: about 9 per 10 files.
    assert!(windows as u64 > files * 8 / 10, "the reference run closed windows ({windows})");
    assert!(kills >= min_kills);
}
