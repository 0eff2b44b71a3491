// Harness tests of the running-count processor (bundled and run by
// sdks/js/bin/eddy-guest-test.mjs).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Harness } from 'eddy-guest/testing';
import { RunningCount } from './app.ts';

const harness = (extra = {}) =>
  new Harness(RunningCount, { inputSchema: 'user STRING, amount BIGINT', keySchema: 'user STRING', outputMode: 'update', ...extra });

test('keeps totals across batches', () => {
  const h = harness();
  assert.deepEqual(h.feed('alice', [['alice', 5n], ['alice', 7n]]).toArrays(), [['alice', 2n, 12n]]);
  assert.deepEqual(h.feed('alice', [['alice', 1n]]).toArrays(), [['alice', 3n, 13n]]);
  assert.deepEqual(h.valueState('totals', 'alice'), { count: 3n, sum: 13n });
});

test('stores totals as the Rust module does (CBOR map of two ints)', () => {
  const h = harness();
  h.feed('alice', [['alice', 300n]]);
  // {"count": 1, "sum": 300}
  const expected = [0xa2, 0x65, ...Buffer.from('count'), 0x01, 0x63, ...Buffer.from('sum'), 0x19, 0x01, 0x2c];
  assert.deepEqual([...h.rawValueState('totals', 'alice')!], expected);
});

test('keys are independent', () => {
  const h = harness();
  h.feed('alice', [['alice', 5n]]);
  const out = h.feed('bob', [['bob', 2n], ['bob', 3n]]);
  assert.equal(out.row(0)!.i64('sum'), 5n);
  assert.deepEqual(h.valueState('totals', 'alice'), { count: 1n, sum: 5n });
  assert.equal(h.valueState('totals', 'carol'), undefined);
});

test('null amounts count but do not sum', () => {
  const h = harness();
  const row = h.feed('alice', [['alice', null], ['alice', 4n]]).row(0)!;
  assert.deepEqual([row.i64('count'), row.i64('sum')], [2n, 4n]);
});

test('continues from initial state', () => {
  const h = harness({ initialStateSchema: 'user STRING, count BIGINT, sum BIGINT' });
  h.initialState('bob', [['bob', 10n, 100n], ['bob', 1n, 1n]]);
  assert.deepEqual(h.feed('bob', [['bob', 5n]]).toArrays(), [['bob', 12n, 106n]]);
});

test('int64 sums beyond 2^53 stay exact', () => {
  const h = harness();
  const big = 2n ** 62n + 1n;
  assert.deepEqual(h.feed('z', [['z', big], ['z', 2n]]).toArrays(), [['z', 2n, big + 2n]]);
});
