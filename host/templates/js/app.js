// {{name}}: a running count and sum of amounts per user.
//
// Input `user STRING, amount BIGINT`, keyed by `user`; outputs the user's new totals
// `user STRING, count BIGINT, sum BIGINT` for every batch the user appears in.

import { exportProcessor, StatefulProcessor } from 'eddy-guest';

export class Processor extends StatefulProcessor {
  init(ctx) {
    ctx.setOutputSchema('user STRING, count BIGINT, sum BIGINT');
    // int64 values are BigInt; the state is stored as the Rust SDK stores a struct.
    this.totals = ctx.valueState('totals', { type: { count: 'int64', sum: 'int64' } });
  }

  handleInputRows(key, rows, _timerValues, output) {
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
