//! A running count and sum per user.
//!
//! Input `user STRING, amount BIGINT`, keyed by `user`. Per key a value state
//! `totals` holds `{count, sum}`; every batch emits the key's new totals as one row
//! `user STRING, count BIGINT, sum BIGINT` (meant for the `update` output mode).
//! Rows with a null amount count but add nothing to the sum. A query may start from
//! initial state `user STRING, count BIGINT, sum BIGINT` (`[operator.initial-state]`).

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
    /// The sum of their amounts.
    pub sum: i64,
}

/// The processor.
pub struct RunningCount {
    totals: ValueState<Totals>,
}

impl StatefulProcessor for RunningCount {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        ctx.set_output_schema(Schema::parse("user STRING, count BIGINT, sum BIGINT")?);
        Ok(RunningCount { totals: ctx.value_state("totals", Ttl::NONE)? })
    }

    fn handle_input_rows(
        &mut self,
        key: &Key,
        rows: &Rows,
        _timer_values: &TimerValues,
        output: &mut Output,
    ) -> Result<()> {
        let mut totals = self.totals.get()?.unwrap_or_default();
        let amounts = rows.column("amount")?;
        let values = amounts.i64s()?;
        for (row, amount) in values.iter().enumerate() {
            totals.count += 1;
            if !amounts.is_null(row) {
                totals.sum = totals.sum.wrapping_add(*amount);
            }
        }
        self.totals.update(&totals)?;
        output.append_row(&row![key.str(0)?, totals.count, totals.sum])
    }

    /// Seeds a user's totals from initial-state rows `user, count, sum` (several rows
    /// add up), e.g. to continue from totals computed elsewhere.
    fn handle_initial_state(&mut self, _key: &Key, rows: &Rows, _timer_values: &TimerValues) -> Result<()> {
        let mut totals = self.totals.get()?.unwrap_or_default();
        totals.count += rows.i64s("count")?.iter().sum::<i64>();
        totals.sum += rows.i64s("sum")?.iter().sum::<i64>();
        self.totals.update(&totals)
    }
}

export_processor!(RunningCount);

#[cfg(test)]
mod tests {
    use eddy_guest::testing::Harness;
    use eddy_guest::{OutputMode, Value, row};

    use super::*;

    fn harness() -> Harness<RunningCount> {
        Harness::builder("user STRING, amount BIGINT", "user STRING")
            .output_mode(OutputMode::Update)
            .build()
            .expect("the processor initializes")
    }

    #[test]
    fn continues_from_initial_state() -> Result<()> {
        let mut h = Harness::<RunningCount>::builder("user STRING, amount BIGINT", "user STRING")
            .output_mode(OutputMode::Update)
            .initial_state_schema("user STRING, count BIGINT, sum BIGINT")
            .build()?;
        h.initial_state(&row!["bob"], &[row!["bob", 10, 100], row!["bob", 1, 1]])?;
        let out = h.feed(&row!["bob"], &[row!["bob", 5]])?;
        assert_eq!(out.to_values(), vec![vec![Value::from("bob"), Value::from(12), Value::from(106)]]);
        Ok(())
    }

    #[test]
    fn keeps_totals_across_batches() -> Result<()> {
        let mut h = harness();
        let out = h.feed(&row!["alice"], &[row!["alice", 5], row!["alice", 7]])?;
        assert_eq!(out.to_values(), vec![vec![Value::from("alice"), Value::from(2), Value::from(12)]]);

        let out = h.feed(&row!["alice"], &[row!["alice", 1]])?;
        assert_eq!(out.to_values(), vec![vec![Value::from("alice"), Value::from(3), Value::from(13)]]);
        assert_eq!(h.value_state::<Totals>("totals", &row!["alice"])?, Some(Totals { count: 3, sum: 13 }));
        Ok(())
    }

    #[test]
    fn keys_are_independent() -> Result<()> {
        let mut h = harness();
        h.feed(&row!["alice"], &[row!["alice", 5]])?;
        let out = h.feed(&row!["bob"], &[row!["bob", 2], row!["bob", 3]])?;
        assert_eq!(out.row(0).map(|r| r.i64("sum")).transpose()?, Some(5));
        assert_eq!(h.value_state::<Totals>("totals", &row!["alice"])?, Some(Totals { count: 1, sum: 5 }));
        assert_eq!(h.value_state::<Totals>("totals", &row!["carol"])?, None);
        Ok(())
    }

    #[test]
    fn null_amounts_count_but_do_not_sum() -> Result<()> {
        let mut h = harness();
        let out = h.feed(&row!["alice"], &[row!["alice", None::<i64>], row!["alice", 4]])?;
        let row = out.row(0).expect("one output row");
        assert_eq!((row.i64("count")?, row.i64("sum")?), (2, 4));
        Ok(())
    }
}
