//! {{name}}: a running count and sum of amounts per user.
//!
//! Input `user STRING, amount BIGINT`, keyed by `user`; outputs the user's new totals
//! `user STRING, count BIGINT, sum BIGINT` for every batch the user appears in.

use eddy_guest::{
    InitContext, Key, Output, Result, Rows, Schema, StatefulProcessor, TimerValues, Ttl, ValueState, export_processor,
    row,
};
use serde::{Deserialize, Serialize};

/// The per-user totals kept in state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// How many rows the user had.
    pub count: i64,
    /// The sum of their amounts (a null amount adds nothing).
    pub sum: i64,
}

/// The processor.
pub struct Processor {
    totals: ValueState<Totals>,
}

impl StatefulProcessor for Processor {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        ctx.set_output_schema(Schema::parse("user STRING, count BIGINT, sum BIGINT")?);
        Ok(Processor { totals: ctx.value_state("totals", Ttl::NONE)? })
    }

    fn handle_input_rows(&mut self, key: &Key, rows: &Rows, _timers: &TimerValues, output: &mut Output) -> Result<()> {
        let mut totals = self.totals.get()?.unwrap_or_default();
        let amounts = rows.column("amount")?;
        for (row, amount) in amounts.i64s()?.iter().enumerate() {
            totals.count += 1;
            if !amounts.is_null(row) {
                totals.sum += amount;
            }
        }
        self.totals.update(&totals)?;
        output.append_row(&row![key.str(0)?, totals.count, totals.sum])
    }
}

export_processor!(Processor);

#[cfg(test)]
mod tests {
    use eddy_guest::testing::Harness;
    use eddy_guest::{Value, row};

    use super::*;

    #[test]
    fn totals_add_up_across_batches() -> Result<()> {
        let mut harness = Harness::<Processor>::builder("user STRING, amount BIGINT", "user STRING").build()?;
        harness.feed(&row!["alice"], &[row!["alice", 5], row!["alice", 7]])?;
        let out = harness.feed(&row!["alice"], &[row!["alice", 1], row!["alice", None::<i64>]])?;
        assert_eq!(out.to_values(), vec![vec![Value::from("alice"), Value::from(4), Value::from(13)]]);
        Ok(())
    }
}
