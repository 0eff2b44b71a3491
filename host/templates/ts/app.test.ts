// Unit tests of app.ts, natively (no WebAssembly): `npm test`.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Harness } from 'eddy-guest/testing';
import { Processor } from './app.ts';

test('totals add up across batches', () => {
  const harness = new Harness(Processor, { inputSchema: 'user STRING, amount BIGINT', keySchema: 'user STRING' });
  harness.feed('alice', [['alice', 5n], ['alice', 7n]]);
  assert.deepEqual(harness.feed('alice', [['alice', 1n], ['alice', null]]).toArrays(), [['alice', 4n, 13n]]);
  assert.deepEqual(harness.valueState('totals', 'alice'), { count: 4n, sum: 13n });
});
