//! A processor with a bug and its fix, for the failure-containment tests: per
//! customer, the number of invoices and the sum of their amounts.
//!
//! Input `customer STRING, amount STRING`, keyed by `customer`; output
//! `customer STRING, invoices BIGINT, total BIGINT, rejected BIGINT` (one row per key
//! and batch, for the `update` mode). The default build parses each amount and panics
//! on one that is not a number — a trap that fails the batch. Built with the `fixed`
//! feature it counts such an invoice as rejected instead.

use eddy_guest::{
    InitContext, Key, Output, Result, Rows, Schema, StatefulProcessor, TimerValues, Ttl, ValueState, export_processor,
    row,
};
use serde::{Deserialize, Serialize};

/// The per-customer totals kept in state.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Totals {
    invoices: i64,
    total: i64,
    rejected: i64,
}

/// The processor.
pub struct InvoiceTotals {
    totals: ValueState<Totals>,
}

impl StatefulProcessor for InvoiceTotals {
    fn init(ctx: &mut InitContext) -> Result<Self> {
        ctx.set_output_schema(Schema::parse("customer STRING, invoices BIGINT, total BIGINT, rejected BIGINT")?);
        Ok(InvoiceTotals { totals: ctx.value_state("totals", Ttl::NONE)? })
    }

    fn handle_input_rows(
        &mut self,
        key: &Key,
        rows: &Rows,
        _timer_values: &TimerValues,
        output: &mut Output,
    ) -> Result<()> {
        let mut totals = self.totals.get()?.unwrap_or_default();
        for row in rows.iter() {
            let text = row.str_opt("amount")?.unwrap_or("0");
            match parse(text) {
                Some(amount) => {
                    totals.invoices += 1;
                    totals.total += amount;
                }
                None => totals.rejected += 1,
            }
        }
        self.totals.update(&totals)?;
        output.append_row(&row![key.str(0)?, totals.invoices, totals.total, totals.rejected])
    }
}

#[cfg(not(feature = "fixed"))]
fn parse(text: &str) -> Option<i64> {
    Some(text.trim().parse().expect("an invoice amount is a number"))
}

#[cfg(feature = "fixed")]
fn parse(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

export_processor!(InvoiceTotals);
