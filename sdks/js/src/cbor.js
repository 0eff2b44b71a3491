// CBOR (RFC 8949) encoding and decoding, byte-compatible with what the Rust SDK's
// `ciborium` 0.2 writes: shortest integer heads, definite lengths, and floats in the
// shortest width (f16, f32 or f64) that holds the value exactly.
//
// Generic mapping: bigint <-> integer, number <-> float, string <-> text,
// Uint8Array <-> byte string, Array <-> array, Map (or plain object) <-> map,
// boolean, null. Decoding yields integers as BigInt and maps as Map.

import { decodeUtf8, encodeUtf8 } from './utf8.js';

const MAX_U64 = (1n << 64n) - 1n;

/** An error in CBOR data or in a value that cannot be encoded. */
export class CborError extends Error {
  constructor(message) {
    super(message);
    this.name = 'CborError';
  }
}

/** A growable byte buffer that CBOR items are written into. */
export class Writer {
  constructor() {
    this.bytes = new Uint8Array(64);
    this.length = 0;
    this.view = new DataView(this.bytes.buffer);
  }

  reserve(n) {
    if (this.length + n <= this.bytes.length) return;
    let size = this.bytes.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.bytes.subarray(0, this.length));
    this.bytes = next;
    this.view = new DataView(next.buffer);
  }

  byte(b) {
    this.reserve(1);
    this.bytes[this.length++] = b;
  }

  raw(bytes) {
    this.reserve(bytes.length);
    this.bytes.set(bytes, this.length);
    this.length += bytes.length;
  }

  /** Writes a head: major type and argument (a number or bigint >= 0), shortest form. */
  head(major, arg) {
    const m = major << 5;
    if (typeof arg === 'number' && arg <= 0xffffffff) {
      if (arg < 24) return this.byte(m | arg);
      if (arg <= 0xff) return (this.byte(m | 24), this.byte(arg));
      this.reserve(5);
      if (arg <= 0xffff) {
        this.bytes[this.length++] = m | 25;
        this.view.setUint16(this.length, arg);
        this.length += 2;
      } else {
        this.bytes[this.length++] = m | 26;
        this.view.setUint32(this.length, arg);
        this.length += 4;
      }
      return undefined;
    }
    const big = BigInt(arg);
    if (big <= 0xffffffffn) return this.head(major, Number(big));
    this.reserve(9);
    this.bytes[this.length++] = m | 27;
    this.view.setBigUint64(this.length, big);
    this.length += 8;
    return undefined;
  }

  /** An integer (bigint, or a safe-integer number) in -2^64 .. 2^64-1. */
  int(value) {
    const big = BigInt(value);
    if (big >= 0n) {
      if (big > MAX_U64) throw new CborError(`integer ${big} is too large for CBOR`);
      this.head(0, big);
    } else {
      const arg = -1n - big;
      if (arg > MAX_U64) throw new CborError(`integer ${big} is too small for CBOR`);
      this.head(1, arg);
    }
  }

  /** A float in the shortest lossless width, as ciborium writes it. */
  float(value) {
    const half = f16Bits(value);
    if (half !== undefined) {
      this.byte(0xf9);
      this.byte(half >> 8);
      this.byte(half & 0xff);
    } else if (Object.is(Math.fround(value), value)) {
      this.reserve(5);
      this.bytes[this.length++] = 0xfa;
      this.view.setFloat32(this.length, value);
      this.length += 4;
    } else {
      this.reserve(9);
      this.bytes[this.length++] = 0xfb;
      this.view.setFloat64(this.length, value);
      this.length += 8;
    }
  }

  text(value) {
    const bytes = encodeUtf8(value);
    this.head(3, bytes.length);
    this.raw(bytes);
  }

  bin(value) {
    this.head(2, value.length);
    this.raw(value);
  }

  bool(value) {
    this.byte(value ? 0xf5 : 0xf4);
  }

  null() {
    this.byte(0xf6);
  }

  finish() {
    return this.bytes.slice(0, this.length);
  }
}


/**
 * The IEEE 754 half-precision bits of `value` when the value is exactly a half
 * (NaN maps to the quiet NaN 0x7e00, as ciborium writes f64::NAN), else undefined.
 */
export function f16Bits(value) {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const abs = Math.abs(value);
  if (abs === 0) return sign;
  if (abs === Infinity) return sign | 0x7c00;
  if (abs > 65504) return undefined;
  if (abs < 2 ** -14) {
    const mantissa = abs / 2 ** -24; // subnormal: exact when an integer
    return Number.isInteger(mantissa) ? sign | mantissa : undefined;
  }
  let exp = Math.floor(Math.log2(abs));
  if (2 ** exp > abs) exp -= 1;
  if (2 ** (exp + 1) <= abs) exp += 1;
  const mantissa = (abs / 2 ** exp - 1) * 1024;
  if (!Number.isInteger(mantissa)) return undefined;
  return sign | ((exp + 15) << 10) | mantissa;
}

/** The value of half-precision bits. */
export function f16Value(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exp === 0) return sign * mantissa * 2 ** -24;
  if (exp === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exp - 15);
}

/** Encodes a JS value with the generic mapping (see the module comment). */
export function encodeAny(value) {
  const w = new Writer();
  writeAny(w, value);
  return w.finish();
}

/** Writes a JS value with the generic mapping. */
export function writeAny(w, value, path = 'value') {
  if (value === null || value === undefined) return w.null();
  switch (typeof value) {
    case 'bigint':
      return w.int(value);
    case 'number':
      return w.float(value);
    case 'string':
      return w.text(value);
    case 'boolean':
      return w.bool(value);
    default:
  }
  if (value instanceof Uint8Array) return w.bin(value);
  if (Array.isArray(value)) {
    w.head(4, value.length);
    value.forEach((item, i) => writeAny(w, item, `${path}[${i}]`));
    return undefined;
  }
  if (value instanceof Map) {
    w.head(5, value.size);
    for (const [k, v] of value) {
      writeAny(w, k, `${path} key`);
      writeAny(w, v, `${path}.${String(k)}`);
    }
    return undefined;
  }
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    w.head(5, entries.length);
    for (const [k, v] of entries) {
      w.text(k);
      writeAny(w, v, `${path}.${k}`);
    }
    return undefined;
  }
  throw new CborError(`${path}: cannot encode a ${value?.constructor?.name ?? typeof value} as CBOR`);
}

/** Decodes one CBOR item that fills `bytes` entirely. */
export function decode(bytes) {
  const r = new Reader(bytes);
  const value = r.item();
  if (r.pos !== bytes.length) {
    throw new CborError(`${bytes.length - r.pos} trailing byte(s) after the CBOR item`);
  }
  return value;
}

const BREAK = Symbol('break');

class Reader {
  constructor(bytes) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
    this.depth = 0;
  }

  need(n) {
    if (this.pos + n > this.bytes.length) {
      throw new CborError(`truncated CBOR: wanted ${n} byte(s) at offset ${this.pos}`);
    }
  }

  /** The head's argument as a bigint (or undefined for an indefinite length). */
  argument(info) {
    if (info < 24) return BigInt(info);
    const sizes = { 24: 1, 25: 2, 26: 4, 27: 8 };
    const size = sizes[info];
    if (info === 31) return undefined;
    if (size === undefined) throw new CborError(`reserved additional info ${info} at offset ${this.pos - 1}`);
    this.need(size);
    const at = this.pos;
    this.pos += size;
    if (size === 1) return BigInt(this.bytes[at]);
    if (size === 2) return BigInt(this.view.getUint16(at));
    if (size === 4) return BigInt(this.view.getUint32(at));
    return this.view.getBigUint64(at);
  }

  length(arg) {
    // Every element or byte takes at least one byte, so a longer length is truncated.
    if (arg > BigInt(this.bytes.length - this.pos)) {
      throw new CborError(`truncated CBOR: a length of ${arg} at offset ${this.pos} exceeds the data`);
    }
    return Number(arg);
  }

  chunks(major) {
    const parts = [];
    for (;;) {
      const part = this.item(true);
      if (part === BREAK) break;
      const ok = major === 2 ? part instanceof Uint8Array : typeof part === 'string';
      if (!ok) throw new CborError('an indefinite-length string holds a chunk of another type');
      parts.push(part);
    }
    if (major === 3) return parts.join('');
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) (out.set(p, at), (at += p.length));
    return out;
  }

  item(breakAllowed = false) {
    this.need(1);
    const first = this.bytes[this.pos++];
    const major = first >> 5;
    const info = first & 0x1f;
    if (major === 7) return this.simple(info, breakAllowed);
    const arg = this.argument(info);
    if (arg === undefined && (major === 0 || major === 1 || major === 6)) {
      throw new CborError(`indefinite length is not allowed for major type ${major}`);
    }
    if (++this.depth > 256) throw new CborError('CBOR nested more than 256 levels deep');
    try {
      switch (major) {
        case 0:
          return arg;
        case 1:
          return -1n - arg;
        case 2:
        case 3: {
          if (arg === undefined) return this.chunks(major);
          const n = this.length(arg);
          this.need(n);
          const slice = this.bytes.subarray(this.pos, this.pos + n);
          this.pos += n;
          if (major === 2) return slice.slice();
          try {
            return decodeUtf8(slice);
          } catch {
            throw new CborError(`CBOR text at offset ${this.pos - n} is not valid UTF-8`);
          }
        }
        case 4: {
          const out = [];
          if (arg === undefined) {
            for (let v = this.item(true); v !== BREAK; v = this.item(true)) out.push(v);
          } else {
            for (let i = 0, n = this.length(arg); i < n; i++) out.push(this.item());
          }
          return out;
        }
        case 5: {
          const out = new Map();
          if (arg === undefined) {
            for (let k = this.item(true); k !== BREAK; k = this.item(true)) out.set(k, this.item());
          } else {
            for (let i = 0, n = this.length(arg); i < n; i++) out.set(this.item(), this.item());
          }
          return out;
        }
        default:
          return new Tagged(arg, this.item()); // major 6
      }
    } finally {
      this.depth -= 1;
    }
  }

  simple(info, breakAllowed) {
    switch (info) {
      case 20:
        return false;
      case 21:
        return true;
      case 22:
      case 23:
        return null;
      case 25: {
        this.need(2);
        const v = f16Value(this.view.getUint16(this.pos));
        this.pos += 2;
        return new Float(v);
      }
      case 26: {
        this.need(4);
        const v = this.view.getFloat32(this.pos);
        this.pos += 4;
        return new Float(v);
      }
      case 27: {
        this.need(8);
        const v = this.view.getFloat64(this.pos);
        this.pos += 8;
        return new Float(v);
      }
      case 31:
        if (breakAllowed) return BREAK;
        throw new CborError(`unexpected CBOR break at offset ${this.pos - 1}`);
      default:
        throw new CborError(`unsupported CBOR simple value ${info} at offset ${this.pos - 1}`);
    }
  }
}

/** A decoded CBOR float (kept apart from integers until a type says what it is). */
export class Float {
  constructor(value) {
    this.value = value;
  }
}

/** A decoded CBOR tag and its content. */
export class Tagged {
  constructor(tag, value) {
    this.tag = tag;
    this.value = value;
  }
}

/** Turns a decoded tree into plain JS values: floats become numbers, tags their content. */
export function plain(item) {
  if (item instanceof Float) return item.value;
  if (item instanceof Tagged) return plain(item.value);
  if (Array.isArray(item)) return item.map(plain);
  if (item instanceof Map) {
    const out = new Map();
    for (const [k, v] of item) out.set(plain(k), plain(v));
    return out;
  }
  return item;
}

/** Decodes CBOR into plain JS values (integers as BigInt, maps as Map). */
export function decodeAny(bytes) {
  return plain(decode(bytes));
}

/** Compares two byte arrays lexicographically (negative, zero or positive). */
export function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}
