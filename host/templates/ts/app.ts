// {{name}}: a running count and sum of amounts per user.
//
// Input `user STRING, amount BIGINT`, keyed by `user`; outputs the user's new totals
// `user STRING, count BIGINT, sum BIGINT` for every batch the user appears in.

import { exportProcessor, InitContext, Key, Output, Rows, StatefulProcessor, TimerValues, ValueState } from 'eddy-guest';

/** The per-user totals kept in state (int64 values are BigInt). */
export interface Totals {
  count: bigint;
  sum: bigint;
}

export class Processor extends StatefulProcessor {
  private totals!: ValueState<Totals>;

  override init(ctx: InitContext): void {
    ctx.setOutputSchema('user STRING, count BIGINT, sum BIGINT');
    this.totals = ctx.valueState<Totals>('totals', { type: { count: 'int64', sum: 'int64' } });
  }

  override handleInputRows(key: Key, rows: Rows, _timerValues: TimerValues, output: Output): void {
    const totals = this.totals.get() ?? { count: 0n, sum: 0n };
    const amounts = rows.column('amount');
    const values = amounts.i64s();
    for (let row = 0; row < values.length; row++) {
      totals.count += 1n;
      if (!amounts.isNull(row)) totals.sum += values[row];
    }
    this.totals.update(totals);
    output.appendRow([key.str(0), totals.count, totals.sum]);
  }
}

export const handler = exportProcessor(Processor);
