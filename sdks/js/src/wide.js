// 64-bit integers at the WIT boundary. StarlingMonkey passes s64 as BigInt (and
// list<s64> as BigInt64Array); QuickJS passes them as JS numbers. The SDK always
// hands BigInt to processors: numbers are converted when they are exact (within
// ±2^53) and refused otherwise, since their exact value is already lost.

import { EddyError } from './schema.js';

let numbers = false;

/** Whether the engine passes s64/u64 as numbers (set by the build's entry module). */
export function setInt64AsNumber(flag) {
  numbers = Boolean(flag);
}

/** An s64 from the host as a bigint. */
export function in64(value, what) {
  if (typeof value === 'bigint') return value;
  if (Number.isSafeInteger(value)) return BigInt(value);
  throw new EddyError(
    `${what}: the engine passed ${value}, beyond ±2^53, so its exact value is lost; ` +
      'build with the starlingmonkey engine (the default) for the full int64 range',
  );
}

/** An s64/u64 for the host: a bigint, or a number on engines that take numbers. */
export function out64(value, what) {
  if (value === undefined || !numbers) return value;
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new EddyError(
      `${what}: ${value} is beyond ±2^53, which this engine (QuickJS) cannot pass exactly; ` +
        'build with the starlingmonkey engine (the default) for the full int64 range',
    );
  }
  return n;
}

const is64 = (tag) => tag === 'int64' || tag === 'timestamp';

/** A WIT row-batch with int64/timestamp columns as BigInt64Arrays and var-len data as Uint8Arrays. */
export function batchIn(batch) {
  const convert = (c) =>
    (is64(c.values.tag) && !(c.values.val instanceof BigInt64Array)) ||
    ((c.values.tag === 'utf8' || c.values.tag === 'binary') && !(c.values.val.data instanceof Uint8Array));
  if (!batch.columns.some(convert)) return batch;
  const columns = batch.columns.map((c, i) => {
    if (!convert(c)) return c;
    const { tag, val } = c.values;
    if (is64(tag)) return { ...c, values: { tag, val: BigInt64Array.from(val, (v) => in64(v, `column ${i}`)) } };
    return { ...c, values: { tag, val: { data: Uint8Array.from(val.data), offsets: Uint32Array.from(val.offsets) } } };
  });
  return { ...batch, columns };
}

/** An outgoing WIT row-batch with int64/timestamp columns in the engine's form. */
export function batchOut(batch) {
  if (!numbers) return batch;
  const columns = batch.columns.map((c, i) => {
    const { tag, val } = c.values;
    if (!is64(tag)) return c;
    return { ...c, values: { tag, val: Array.from(val, (v) => out64(v, `output column ${i}`)) } };
  });
  return { ...batch, columns };
}

/** A WIT key (list<scalar>) with int64/timestamp parts as bigints. */
export function keyIn(scalars) {
  return scalars.map((s, i) => (is64(s.tag) ? { tag: s.tag, val: in64(s.val, `key part ${i}`) } : s));
}
