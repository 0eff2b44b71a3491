// CBOR against hand-computed bytes: RFC 8949 appendix A and ciborium's float width rule.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeAny, encodeAny } from '../src/cbor.js';
import { Codec, t } from '../src/types.js';

const hex = (bytes) => Buffer.from(bytes).toString('hex');
const bytes = (h) => new Uint8Array(Buffer.from(h, 'hex'));

test('integers use the shortest head (RFC 8949 appendix A)', () => {
  const cases = [
    [0n, '00'], [1n, '01'], [10n, '0a'], [23n, '17'], [24n, '1818'], [25n, '1819'], [100n, '1864'],
    [1000n, '1903e8'], [1000000n, '1a000f4240'], [1000000000000n, '1b000000e8d4a51000'],
    [18446744073709551615n, '1bffffffffffffffff'], [-1n, '20'], [-10n, '29'], [-100n, '3863'],
    [-1000n, '3903e7'], [-18446744073709551616n, '3bffffffffffffffff'],
  ];
  for (const [value, expected] of cases) {
    assert.equal(hex(encodeAny(value)), expected, `${value}`);
    assert.equal(decodeAny(bytes(expected)), value, expected);
  }
});

test('floats take the shortest lossless width, like ciborium', () => {
  const cases = [
    [0.0, 'f90000'], [-0.0, 'f98000'], [1.0, 'f93c00'], [1.5, 'f93e00'], [65504.0, 'f97bff'],
    [5.960464477539063e-8, 'f90001'], [0.00006103515625, 'f90400'], [-4.0, 'f9c400'],
    [100000.0, 'fa47c35000'], [3.4028234663852886e38, 'fa7f7fffff'], [1.1, 'fb3ff199999999999a'],
    [1.0e300, 'fb7e37e43c8800759c'], [-4.1, 'fbc010666666666666'], [Infinity, 'f97c00'],
    [-Infinity, 'f9fc00'], [NaN, 'f97e00'], [104.0, 'f95680'], [104.2, 'fb405a0ccccccccccd'],
    [65505.0, 'fa477fe100'], [2 ** -25, 'fa33000000'],
  ];
  for (const [value, expected] of cases) {
    assert.equal(hex(encodeAny(value)), expected, `${value}`);
    const back = decodeAny(bytes(expected));
    assert.ok(Object.is(back, value), `${expected} decodes to ${back}, not ${value}`);
  }
});

test('decoding accepts every width and indefinite lengths', () => {
  assert.equal(decodeAny(bytes('1b0000000000000001')), 1n, 'a non-shortest integer');
  assert.equal(decodeAny(bytes('fb3ff8000000000000')), 1.5, 'an f64 that fits f16');
  assert.deepEqual(decodeAny(bytes('9f018202039f0405ffff')), [1n, [2n, 3n], [4n, 5n]]);
  assert.deepEqual(decodeAny(bytes('bf61610161629f0203ffff')), new Map([['a', 1n], ['b', [2n, 3n]]]));
  assert.equal(decodeAny(bytes('7f657374726561646d696e67ff')), 'streaming');
  assert.deepEqual(decodeAny(bytes('5f42010243030405ff')), new Uint8Array([1, 2, 3, 4, 5]));
  assert.equal(decodeAny(bytes('6449455446')), 'IETF');
  assert.equal(decodeAny(bytes('62c3bc')), 'ü');
  assert.deepEqual(decodeAny(bytes('a201020304')), new Map([[1n, 2n], [3n, 4n]]));
  assert.equal(decodeAny(bytes('f6')), null);
  assert.equal(decodeAny(bytes('f5')), true);
});

test('malformed CBOR is refused with a reason', () => {
  assert.throws(() => decodeAny(bytes('1a0000')), /truncated/);
  assert.throws(() => decodeAny(bytes('0101')), /trailing/);
  assert.throws(() => decodeAny(bytes('62c3')), /truncated/);
  assert.throws(() => decodeAny(bytes('ff')), /unexpected CBOR break/);
  assert.throws(() => decodeAny(bytes('62ffff')), /not valid UTF-8/);
});

test('typed structs encode as serde does, in field order', () => {
  const totals = new Codec({ count: 'int64', sum: 'int64' });
  // {"count": 3, "sum": -2}
  assert.equal(hex(totals.encode({ sum: -2n, count: 3 })), 'a265636f756e74036373756d21');
  assert.deepEqual(totals.decode(bytes('a265636f756e74036373756d21')), { count: 3n, sum: -2n });
  assert.throws(() => totals.encode({ count: 1.5, sum: 0n }), /count: expected an int64/);
  assert.throws(() => totals.decode(bytes('a165636f756e7403')), /missing field `sum`/);
  assert.throws(() => totals.decode(bytes('a265636f756e74f93c006373756d00')), /expected an int64/);
  assert.throws(() => totals.encode({ count: 2n ** 63n, sum: 0n }), /in range/);
});

test('optional, list, tuple, map and bytes types', () => {
  const c = new Codec(t.tuple(t.optional('int64'), t.list('float64'), t.map('string', 'int64'), 'bytes'));
  const value = [null, [1.0, 0.1], new Map([['b', 1n], ['a', 2n]]), new Uint8Array([7])];
  const encoded = c.encode(value);
  assert.equal(hex(encoded), '84f682f93c00fb3fb999999999999aa261620161610241' + '07');
  assert.deepEqual(c.decode(encoded), value);
  assert.deepEqual(new Codec('bytes').decode(bytes('83010203')), new Uint8Array([1, 2, 3]), "serde's Vec<u8>");
  assert.equal(hex(new Codec('string').encode('2026-11-29')), '6a323032362d31312d3239');
  assert.throws(() => new Codec('int32'), /unknown state type "int32"/);
});

test('untyped values: bigint is an integer, number a float', () => {
  const value = new Map([['n', 1n], ['x', 1], ['s', 'a'], ['l', [true, null]]]);
  const encoded = encodeAny({ n: 1n, x: 1, s: 'a', l: [true, null] });
  assert.equal(hex(encoded), 'a4616e016178f93c0061736161616c82f5f6');
  assert.deepEqual(decodeAny(encoded), value);
});
