// A running count and sum per user: the TypeScript port of ../src/lib.rs.
//
// Input `user STRING, amount BIGINT`, keyed by `user`. Per key a value state `totals`
// holds `{count, sum}` (int64s, stored exactly as the Rust module stores them, so a
// checkpoint moves between the two); every batch emits the key's new totals as one
// row `user STRING, count BIGINT, sum BIGINT` (meant for the `update` output mode).
// Rows with a null amount count but add nothing to the sum. A query may start from
// initial state `user STRING, count BIGINT, sum BIGINT`.

import {
  exportProcessor,
  InitContext,
  Key,
  Output,
  Rows,
  StatefulProcessor,
  TimerValues,
  ValueState,
} from 'eddy-guest';

/** The per-user totals kept in state. */
export interface Totals {
  count: bigint;
  sum: bigint;
}

/** The state type of `totals`: a struct of two int64s, in the Rust field order. */
export const TOTALS = { count: 'int64', sum: 'int64' } as const;

export class RunningCount extends StatefulProcessor {
  private totals!: ValueState<Totals>;

  override init(ctx: InitContext): void {
    ctx.setOutputSchema('user STRING, count BIGINT, sum BIGINT');
    this.totals = ctx.valueState<Totals>('totals', { type: TOTALS });
  }

  override handleInputRows(key: Key, rows: Rows, _timerValues: TimerValues, output: Output): void {
    const totals = this.totals.get() ?? { count: 0n, sum: 0n };
    const amounts = rows.column('amount');
    const values = amounts.i64s();
    for (let row = 0; row < values.length; row++) {
      totals.count += 1n;
      if (!amounts.isNull(row)) totals.sum = BigInt.asIntN(64, totals.sum + values[row]);
    }
    this.totals.update(totals);
    output.appendRow([key.str(0), totals.count, totals.sum]);
  }

  /** Seeds a user's totals from initial-state rows `user, count, sum` (several rows add up). */
  override handleInitialState(_key: Key, rows: Rows, _timerValues: TimerValues): void {
    const totals = this.totals.get() ?? { count: 0n, sum: 0n };
    for (const c of rows.i64s('count')) totals.count += c;
    for (const s of rows.i64s('sum')) totals.sum += s;
    this.totals.update(totals);
  }
}

export const handler = exportProcessor(RunningCount);
