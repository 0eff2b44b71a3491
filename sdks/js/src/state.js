// Typed state variables and timers over a backend: the WIT host imports in a
// component, or the in-memory store of the test harness.

import { Codec, describe } from './types.js';
import { EddyError } from './schema.js';

/** Shared by every handle of one processor instance. */
export class Store {
  constructor(backend) {
    this.backend = backend;
    this.active = false;
    this.timeMode = 'none';
  }

  /** Throws unless a handler with a current key runs. */
  check(what) {
    if (!this.active) {
      throw new EddyError(
        `${what} can only be used inside handleInputRows, handleExpiredTimer or handleInitialState, ` +
          `where a key is current (not in init or close)`,
      );
    }
    return this.backend;
  }
}

function wrap(name, type, fn) {
  try {
    return fn();
  } catch (e) {
    if (e instanceof EddyError) throw e;
    throw new EddyError(
      `state \`${name}\`: ${e.message} (declared type ${describe(type)}; did the variable's type change? ` +
        `then give the new type a new variable name)`,
    );
  }
}

class Variable {
  constructor(name, store, codec) {
    this.name = name;
    this.store = store;
    this.codec = codec;
  }

  backend() {
    return this.store.check(`state variable \`${this.name}\``);
  }

  enc(value, codec = this.codec) {
    return wrap(this.name, codec.type, () => codec.encode(value, this.name));
  }

  dec(bytes, codec = this.codec) {
    return wrap(this.name, codec.type, () => codec.decode(bytes, this.name));
  }
}

/** One value per key (Spark's ValueState); declared in init with `ctx.valueState`. */
export class ValueState extends Variable {
  constructor(name, store, type) {
    super(name, store, new Codec(type));
  }

  /** The current key's value, or undefined when there is none (or it expired). */
  get() {
    const bytes = this.backend().valueGet(this.name);
    return bytes === undefined ? undefined : this.dec(bytes);
  }

  /** Whether the current key has a live value. */
  exists() {
    return this.backend().valueGet(this.name) !== undefined;
  }

  /** Replaces the current key's value (and restarts its TTL). */
  update(value) {
    const bytes = this.enc(value);
    this.backend().valueUpdate(this.name, bytes);
  }

  /** Removes the current key's value. */
  clear() {
    this.backend().valueClear(this.name);
  }
}

/** An ordered list of values per key (Spark's ListState); declared with `ctx.listState`. */
export class ListState extends Variable {
  constructor(name, store, type) {
    super(name, store, new Codec(type));
  }

  /** The current key's live elements, oldest first. */
  get() {
    return this.backend().listGet(this.name).map((bytes) => this.dec(bytes));
  }

  /** Whether the current key has at least one live element. */
  exists() {
    return this.backend().listGet(this.name).length > 0;
  }

  /** Appends one element. */
  appendValue(value) {
    this.appendList([value]);
  }

  /** Appends elements at the end, in order. */
  appendList(values) {
    const all = Array.from(values, (v) => this.enc(v));
    this.backend().listAppend(this.name, all);
  }

  /** Replaces the whole list. */
  put(values) {
    const all = Array.from(values, (v) => this.enc(v));
    this.backend().listPut(this.name, all);
  }

  /** Removes every element. */
  clear() {
    this.backend().listClear(this.name);
  }
}

/**
 * A map of user keys to values per key (Spark's MapState); declared with
 * `ctx.mapState`. Iteration follows the byte order of the CBOR-encoded user keys.
 */
export class MapState extends Variable {
  constructor(name, store, keyType, valueType) {
    super(name, store, new Codec(valueType));
    this.keyCodec = new Codec(keyType);
  }

  key(userKey) {
    return this.enc(userKey, this.keyCodec);
  }

  /** The value for `userKey`, or undefined. */
  get(userKey) {
    const bytes = this.backend().mapGet(this.name, this.key(userKey));
    return bytes === undefined ? undefined : this.dec(bytes);
  }

  /** Whether `userKey` has a live value. */
  contains(userKey) {
    return this.backend().mapContains(this.name, this.key(userKey));
  }

  /** Sets the value for `userKey` (and restarts its TTL). */
  update(userKey, value) {
    const k = this.key(userKey);
    const v = this.enc(value);
    this.backend().mapUpdate(this.name, k, v);
  }

  /** Removes `userKey`. */
  remove(userKey) {
    this.backend().mapRemove(this.name, this.key(userKey));
  }

  /** Whether the map has at least one live entry. */
  exists() {
    return this.backend().mapExists(this.name);
  }

  /** Every live user key, in key order. */
  keys() {
    return this.backend().mapKeys(this.name).map((k) => this.dec(k, this.keyCodec));
  }

  /** Every live value, in key order. */
  values() {
    return this.backend().mapValues(this.name).map((v) => this.dec(v));
  }

  /** Every live entry as [key, value], in key order. */
  entries() {
    return this.backend()
      .mapEntries(this.name)
      .map(([k, v]) => [this.dec(k, this.keyCodec), this.dec(v)]);
  }

  /** Removes every entry. */
  clear() {
    this.backend().mapClear(this.name);
  }
}

function micros(value, what) {
  if (typeof value === 'bigint') {
    if (BigInt.asIntN(64, value) !== value) throw new EddyError(`${what} ${value} is out of the int64 range`);
    return value;
  }
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  throw new EddyError(`${what} must be microseconds as a bigint (or a safe integer), got ${typeof value} ${String(value)}`);
}

/**
 * The timers of the current key (obtained in init with `ctx.timers()`), in the domain
 * of the declared time mode. Registering a time twice keeps one timer; a timer is
 * removed when it fires, so handleExpiredTimer may register it again.
 */
export class Timers {
  constructor(store) {
    this.store = store;
  }

  backend() {
    const backend = this.store.check('timers');
    if (this.store.timeMode === 'none') {
      throw new EddyError(`timers need a time mode: call \`ctx.setTimeMode("processing-time")\` (or "event-time") in init`);
    }
    return backend;
  }

  /** Registers a timer at `expiryTime` (microseconds since the epoch). */
  register(expiryTime) {
    const at = micros(expiryTime, 'a timer expiry time');
    this.backend().timerRegister(at);
  }

  /** Deletes the timer at `expiryTime`, if there is one. */
  delete(expiryTime) {
    const at = micros(expiryTime, 'a timer expiry time');
    this.backend().timerDelete(at);
  }

  /** The current key's timers (bigint microseconds), earliest first. */
  list() {
    return Array.from(this.backend().timerList());
  }
}

export { micros };
