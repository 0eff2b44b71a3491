// Typed state values: a descriptor says how a JS value maps to the CBOR that the
// Rust SDK (serde + ciborium) writes for the same Rust type, so that checkpoints
// move between languages.
//
//   "int64"   i64      <-> bigint (numbers that are safe integers are accepted on write)
//   "float64" f64      <-> number (always a CBOR float, even when integral: 104.0)
//   "string"  String   <-> string
//   "bool"    bool     <-> boolean
//   "bytes"   ByteBuf  <-> Uint8Array (a CBOR byte string)
//   "any"     (untyped) bigint = integer, number = float, Map/object = map, ...
//   t.optional(T)  Option<T>     <-> T | null
//   t.list(T)      Vec<T>        <-> T[]
//   t.tuple(A, B)  (A, B)        <-> [a, b]
//   t.map(K, V)    BTreeMap<K,V> <-> Map<k, v>
//   {a: A, b: B} or t.struct({..})  a struct with fields in that order <-> {a, b}

import { CborError, Float, Tagged, Writer, decode, writeAny, plain } from './cbor.js';

const SCALARS = new Set(['int64', 'float64', 'string', 'bool', 'bytes', 'any']);
const ALIASES = { i64: 'int64', f64: 'float64', str: 'string', boolean: 'bool' };
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
const BRAND = Symbol('eddy-guest.type');
const mk = (type) => Object.freeze({ ...type, [BRAND]: true });

/** Builders of state type descriptors. */
export const t = Object.freeze({
  int64: 'int64',
  float64: 'float64',
  string: 'string',
  bool: 'bool',
  bytes: 'bytes',
  any: 'any',
  optional: (of) => mk({ kind: 'optional', of: normalize(of) }),
  list: (of) => mk({ kind: 'list', of: normalize(of) }),
  tuple: (...items) => mk({ kind: 'tuple', items: items.map(normalize) }),
  map: (key, value) => mk({ kind: 'map', key: normalize(key), value: normalize(value) }),
  struct: (fields) => normalize(fields),
});

/** Checks a descriptor and puts it in canonical form. */
export function normalize(type) {
  if (type === undefined) return mk({ kind: 'any' });
  if (typeof type === 'string') {
    const name = ALIASES[type] ?? type;
    if (!SCALARS.has(name)) {
      throw new TypeError(
        `unknown state type "${type}"; use one of int64, float64, string, bool, bytes, any, ` +
          `or t.optional/t.list/t.tuple/t.map/a {field: type} object`,
      );
    }
    return mk({ kind: name });
  }
  if (type && typeof type === 'object') {
    if (type[BRAND]) return type;
    const fields = Object.entries(type).map(([name, field]) => [name, normalize(field)]);
    return mk({ kind: 'struct', fields });
  }
  throw new TypeError(`invalid state type ${String(type)}: expected a type name, a t.* type or a {field: type} object`);
}

/** A short description of a type for messages. */
export function describe(type) {
  switch (type.kind) {
    case 'optional':
      return `optional ${describe(type.of)}`;
    case 'list':
      return `list of ${describe(type.of)}`;
    case 'tuple':
      return `(${type.items.map(describe).join(', ')})`;
    case 'map':
      return `map ${describe(type.key)} -> ${describe(type.value)}`;
    case 'struct':
      return `{${type.fields.map(([n, f]) => `${n}: ${describe(f)}`).join(', ')}}`;
    default:
      return type.kind;
  }
}

function fail(path, wanted, value) {
  const shown = typeof value === 'bigint' ? `${value}n` : typeof value === 'string' ? JSON.stringify(value) : String(value);
  return new CborError(`${path}: expected ${wanted}, got ${typeof value} ${shown.slice(0, 80)}`);
}

function write(w, type, value, path) {
  switch (type.kind) {
    case 'any':
      return writeAny(w, value, path);
    case 'int64': {
      let big;
      if (typeof value === 'bigint') big = value;
      else if (typeof value === 'number' && Number.isSafeInteger(value)) big = BigInt(value);
      else throw fail(path, 'an int64 (bigint or safe integer)', value);
      if (big < I64_MIN || big > I64_MAX) throw fail(path, 'an int64 in range', value);
      return w.int(big);
    }
    case 'float64':
      if (typeof value === 'number') return w.float(value);
      if (typeof value === 'bigint') return w.float(Number(value));
      throw fail(path, 'a float64 (number)', value);
    case 'string':
      if (typeof value !== 'string') throw fail(path, 'a string', value);
      return w.text(value);
    case 'bool':
      if (typeof value !== 'boolean') throw fail(path, 'a boolean', value);
      return w.bool(value);
    case 'bytes':
      if (!(value instanceof Uint8Array)) throw fail(path, 'a Uint8Array', value);
      return w.bin(value);
    case 'optional':
      if (value === null || value === undefined) return w.null();
      return write(w, type.of, value, path);
    case 'list':
      if (!Array.isArray(value) && !ArrayBuffer.isView(value)) throw fail(path, 'an array', value);
      w.head(4, value.length);
      for (let i = 0; i < value.length; i++) write(w, type.of, value[i], `${path}[${i}]`);
      return undefined;
    case 'tuple':
      if (!Array.isArray(value) || value.length !== type.items.length) {
        throw fail(path, `an array of ${type.items.length}`, value);
      }
      w.head(4, value.length);
      type.items.forEach((item, i) => write(w, item, value[i], `${path}[${i}]`));
      return undefined;
    case 'map': {
      const entries = value instanceof Map ? [...value] : value && typeof value === 'object' ? Object.entries(value) : null;
      if (!entries) throw fail(path, 'a Map', value);
      w.head(5, entries.length);
      for (const [k, v] of entries) {
        write(w, type.key, k, `${path} key`);
        write(w, type.value, v, `${path}[${String(k)}]`);
      }
      return undefined;
    }
    case 'struct':
      if (!value || typeof value !== 'object') throw fail(path, `an object ${describe(type)}`, value);
      w.head(5, type.fields.length);
      for (const [name, field] of type.fields) {
        w.text(name);
        write(w, field, value[name], `${path}.${name}`);
      }
      return undefined;
    default:
      throw new CborError(`${path}: unknown type kind ${type.kind}`);
  }
}

function read(type, item, path) {
  switch (type.kind) {
    case 'any':
      return plain(item);
    case 'int64':
      if (typeof item !== 'bigint' || item < I64_MIN || item > I64_MAX) throw fail(path, 'an int64', plain(item));
      return item;
    case 'float64':
      if (item instanceof Float) return item.value;
      if (typeof item === 'bigint') return Number(item);
      throw fail(path, 'a float64', plain(item));
    case 'string':
      if (typeof item !== 'string') throw fail(path, 'a string', plain(item));
      return item;
    case 'bool':
      if (typeof item !== 'boolean') throw fail(path, 'a boolean', plain(item));
      return item;
    case 'bytes':
      if (item instanceof Uint8Array) return item;
      if (Array.isArray(item) && item.every((b) => typeof b === 'bigint' && b >= 0n && b <= 255n)) {
        return Uint8Array.from(item, Number); // serde's Vec<u8>
      }
      throw fail(path, 'bytes', plain(item));
    case 'optional':
      return item === null ? null : read(type.of, item, path);
    case 'list':
      if (!Array.isArray(item)) throw fail(path, 'an array', plain(item));
      return item.map((v, i) => read(type.of, v, `${path}[${i}]`));
    case 'tuple':
      if (!Array.isArray(item) || item.length !== type.items.length) {
        throw fail(path, `an array of ${type.items.length}`, plain(item));
      }
      return item.map((v, i) => read(type.items[i], v, `${path}[${i}]`));
    case 'map': {
      if (!(item instanceof Map)) throw fail(path, 'a map', plain(item));
      const out = new Map();
      for (const [k, v] of item) out.set(read(type.key, k, `${path} key`), read(type.value, v, `${path}[${String(k)}]`));
      return out;
    }
    case 'struct': {
      // serde also reads a struct from an array of its fields in order.
      if (Array.isArray(item) && item.length === type.fields.length) {
        return Object.fromEntries(type.fields.map(([name, field], i) => [name, read(field, item[i], `${path}.${name}`)]));
      }
      if (!(item instanceof Map)) throw fail(path, `a map ${describe(type)}`, plain(item));
      const out = {};
      for (const [name, field] of type.fields) {
        if (item.has(name)) out[name] = read(field, item.get(name), `${path}.${name}`);
        else if (field.kind === 'optional' || field.kind === 'any') out[name] = null;
        else throw new CborError(`${path}: missing field \`${name}\``);
      }
      return out;
    }
    default:
      throw new CborError(`${path}: unknown type kind ${type.kind}`);
  }
}

/** A codec for one (normalized) type: encode(value) -> bytes, decode(bytes) -> value. */
export class Codec {
  constructor(type) {
    this.type = normalize(type);
  }

  encode(value, what = 'value') {
    const w = new Writer();
    write(w, this.type, value, what);
    return w.finish();
  }

  decode(bytes, what = 'value') {
    return read(this.type, decode(bytes), what);
  }
}

export { Tagged };
