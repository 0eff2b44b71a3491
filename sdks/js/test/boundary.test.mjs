// The UTF-8 fallback for engines without TextEncoder/TextDecoder, and 64-bit
// integers from engines that pass them as numbers (QuickJS).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchIn, batchOut, in64, keyIn, out64, setInt64AsNumber } from '../src/wide.js';

test('the UTF-8 fallback matches TextEncoder/TextDecoder', async () => {
  const { TextEncoder: E, TextDecoder: D } = globalThis;
  delete globalThis.TextEncoder;
  delete globalThis.TextDecoder;
  let fallback;
  try {
    fallback = await import('../src/utf8.js?fallback');
  } finally {
    globalThis.TextEncoder = E;
    globalThis.TextDecoder = D;
  }
  const decoder = new TextDecoder('utf-8', { fatal: true });
  for (const text of ['', 'abc', 'é', '€', '😀x', 'a\u0000b', '\ud800', 'z\udfff']) {
    assert.deepEqual(fallback.encodeUtf8(text), new TextEncoder().encode(text), JSON.stringify(text));
  }
  for (const hex of ['', '61', 'c3a9', 'e282ac', 'f09f9880', 'c3', 'ff', 'c0af', 'eda080', 'f4908080', 'e282', '80']) {
    const bytes = new Uint8Array(Buffer.from(hex, 'hex'));
    const attempt = (fn) => {
      try {
        return fn(bytes);
      } catch {
        return 'invalid';
      }
    };
    assert.equal(attempt(fallback.decodeUtf8), attempt((b) => decoder.decode(b)), hex);
  }
});

test('64-bit numbers from the engine become exact bigints or are refused', () => {
  assert.equal(in64(5, 'x'), 5n);
  assert.equal(in64(-(2 ** 53) + 1, 'x'), -(2n ** 53n) + 1n);
  assert.equal(in64(2n ** 62n, 'x'), 2n ** 62n);
  assert.throws(() => in64(2 ** 60, 'column 1'), /column 1: the engine passed .* beyond ±2\^53/);
  const batch = batchIn({ numRows: 2, columns: [{ values: { tag: 'timestamp', val: [1, 2] } }, { values: { tag: 'utf8', val: { data: [97, 98], offsets: [0, 1, 2] } } }] });
  assert.deepEqual([...batch.columns[0].values.val], [1n, 2n]);
  assert.ok(batch.columns[1].values.val.data instanceof Uint8Array);
  assert.deepEqual(keyIn([{ tag: 'int64', val: 7 }, { tag: 'utf8', val: 'a' }]), [{ tag: 'int64', val: 7n }, { tag: 'utf8', val: 'a' }]);
});

test('outgoing 64-bit values are numbers only on engines that need them', () => {
  const wire = { numRows: 1, columns: [{ values: { tag: 'int64', val: BigInt64Array.from([3n]) } }] };
  assert.equal(out64(3n, 't'), 3n);
  assert.equal(batchOut(wire), wire);
  setInt64AsNumber(true);
  try {
    assert.equal(out64(3n, 't'), 3);
    assert.deepEqual(batchOut(wire).columns[0].values.val, [3]);
    assert.throws(() => out64(2n ** 60n, 'timer'), /timer: .* beyond ±2\^53/);
  } finally {
    setInt64AsNumber(false);
  }
});
