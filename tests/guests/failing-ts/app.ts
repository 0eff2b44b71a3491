// A test processor that throws: a negative amount is an error (tests/tests/all/guest_languages.rs).

import { exportProcessor, InitContext, Key, Output, Rows, StatefulProcessor, TimerValues } from 'eddy-guest';

/** Refuses a negative amount, deep enough in the stack to show in the trace. */
function checkAmount(user: string, amount: bigint): void {
  if (amount < 0n) throw new RangeError(`negative amount ${amount} for ${user}`);
}

class Failing extends StatefulProcessor {
  override init(ctx: InitContext): void {
    ctx.setOutputSchema('user STRING, amount BIGINT');
  }

  override handleInputRows(key: Key, rows: Rows, _timerValues: TimerValues, output: Output): void {
    for (const amount of rows.i64s('amount')) {
      checkAmount(key.str(0), amount);
      output.appendRow([key.str(0), amount]);
    }
  }
}

export const handler = exportProcessor(Failing);
