// Harness tests of the alert-suppression processor (bundled and run by
// sdks/js/bin/eddy-guest-test.mjs): raise, suppress, reminder, clear, per-day counts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Codec, type Rows } from 'eddy-guest';
import { Harness } from 'eddy-guest/testing';
import { ALERT, AlertSuppression, utcDate } from './app.ts';

const SEC = 1_000_000n;
/** 2023-11-14T22:13:20Z. */
const T0 = 1_700_000_000n * SEC;

const harness = () =>
  new Harness(AlertSuppression, {
    inputSchema: 'sensor STRING, reading DOUBLE, ts TIMESTAMP',
    keySchema: 'sensor STRING',
    config: { threshold: 100.0, suppress_secs: 60, clear_after: 2 },
    processingTime: T0,
  });

/** [event, reading, suppressed, raised_today] of every output row. */
const events = (rows: Rows) => [...rows].map((r) => [r.str('event'), r.f64('reading'), r.i64('suppressed'), r.i64('raised_today')]);

test('raises once and suppresses repeats', () => {
  const h = harness();
  const out = h.feed('s1', [['s1', 50.0, T0], ['s1', 120.0, T0 + SEC], ['s1', 130.0, T0 + 2n * SEC]]);
  assert.deepEqual(events(out), [['RAISE', 120.0, 0n, 1n]]);
  assert.equal(out.row(0)!.timestamp('ts'), T0 + SEC);
  assert.deepEqual(h.timers('s1'), [T0 + 60n * SEC]);
  assert.equal(h.feed('s1', [['s1', 140.0, T0 + 3n * SEC]]).length, 0, 'repeats are suppressed');
  const alert = h.valueState('alert', 's1');
  assert.deepEqual([alert.suppressed, alert.last_reading], [2n, 140.0]);
});

test('reminds when the timer fires above the threshold, then stops below it', () => {
  const h = harness();
  h.feed('s1', [['s1', 120.0, T0], ['s1', 150.0, T0], ['s1', 110.0, T0]]);
  assert.equal(h.advanceProcessingTime({ seconds: 59 }).length, 0);
  const out = h.advanceProcessingTime({ seconds: 1 });
  assert.deepEqual(events(out), [['REMINDER', 110.0, 2n, 1n]]);
  assert.deepEqual(h.timers('s1'), [T0 + 120n * SEC], 'the timer is armed again');
  h.feed('s1', [['s1', 90.0, T0 + 61n * SEC]]);
  assert.equal(h.advanceProcessingTime({ seconds: 60 }).length, 0, 'below the threshold: no reminder');
  assert.equal(h.valueState('alert', 's1').timer, null);
  const again = h.feed('s1', [['s1', 105.0, T0 + 200n * SEC]]);
  assert.deepEqual(events(again), [['REMINDER', 105.0, 0n, 1n]], 'the next alarm reading is reported at once');
});

test('clears after enough normal readings and deletes the timer', () => {
  const h = harness();
  h.feed('s1', [['s1', 120.0, T0]]);
  const out = h.feed('s1', [['s1', 90.0, T0 + SEC], ['s1', 80.0, T0 + 2n * SEC]]);
  assert.deepEqual(events(out), [['CLEAR', 80.0, 0n, 1n]]);
  assert.deepEqual(h.timers('s1'), []);
  assert.equal(h.valueState('alert', 's1'), undefined);
  assert.deepEqual(h.listState('recent', 's1'), [90.0, 80.0]);
});

test('counts raises per UTC day, forgotten 24 h after the last write', () => {
  const h = harness();
  h.feed('s1', [['s1', 120.0, T0]]);
  h.feed('s1', [['s1', 1.0, T0], ['s1', 2.0, T0]]);
  const out = h.feed('s1', [['s1', 130.0, T0 + SEC]]);
  assert.deepEqual(events(out), [['RAISE', 130.0, 0n, 2n]]);
  assert.deepEqual(h.mapState('raised_per_day', 's1'), [['2023-11-14', 2n]]);
  h.advanceProcessingTime({ hours: 24 });
  assert.deepEqual(h.mapState('raised_per_day', 's1'), [], 'the TTL expired');
});

test('skips null readings and takes a null ts as the processing time', () => {
  const h = harness();
  const out = h.feed('s1', [['s1', null, T0], ['s1', 101.0, null]]);
  assert.deepEqual(events(out), [['RAISE', 101.0, 0n, 1n]]);
  assert.equal(out.row(0)!.timestamp('ts'), T0);
});

test('alert state is encoded as the Rust struct (integral floats as CBOR floats)', () => {
  const bytes = new Codec(ALERT).encode({ suppressed: 2n, timer: null, last_reading: 120.0, last_ts: 5n });
  const text = (s: string) => [0x60 + s.length, ...Buffer.from(s)];
  const expected = [0xa4, ...text('suppressed'), 0x02, ...text('timer'), 0xf6, ...text('last_reading'), 0xf9, 0x57, 0x80, ...text('last_ts'), 0x05];
  assert.deepEqual([...bytes], expected);
});

test('refuses a bad config', () => {
  const build = (config: object) => () =>
    new Harness(AlertSuppression, { inputSchema: 'sensor STRING, reading DOUBLE, ts TIMESTAMP', keySchema: 'sensor STRING', config });
  assert.throws(build({ suppress_secs: 0 }), /suppress_secs > 0/);
  assert.throws(build({ threshhold: 5 }), /unknown field\(s\) threshhold/);
});

test('utc dates', () => {
  assert.equal(utcDate(0n), '1970-01-01');
  assert.equal(utcDate(T0), '2023-11-14');
  assert.equal(utcDate(-1n), '1969-12-31');
  assert.equal(utcDate(951_782_400n * SEC), '2000-02-29');
});
