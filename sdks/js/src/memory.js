// The in-memory store of the test harness, with the host's semantics: state and
// timers per key, TTL counted from each write in processing time (a value whose
// expiry <= the processing time is invisible), map entries in byte order of their
// encoded user keys, timers deduplicated and listed in order.

import { compareBytes } from './cbor.js';

const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

function cloneEntry(e) {
  return { bytes: e.bytes, expires: e.expires };
}

export class MemoryStore {
  constructor() {
    this.now = 0n;
    this.key = new Uint8Array(0);
    this.ttls = new Map(); // name -> bigint micros | undefined
    this.values = new Map(); // slot -> entry
    this.lists = new Map(); // slot -> entry[]
    this.maps = new Map(); // slot -> Map(hex user key -> {userKey, entry})
    this.timers = new Map(); // hex key -> {key, times: Set<bigint>}
  }

  /** A deep copy, to restore after a failed call. */
  snapshot() {
    const copy = new MemoryStore();
    copy.now = this.now;
    copy.key = this.key;
    copy.ttls = this.ttls;
    for (const [slot, e] of this.values) copy.values.set(slot, cloneEntry(e));
    for (const [slot, list] of this.lists) copy.lists.set(slot, list.map(cloneEntry));
    for (const [slot, map] of this.maps) {
      copy.maps.set(slot, new Map([...map].map(([k, v]) => [k, { userKey: v.userKey, entry: cloneEntry(v.entry) }])));
    }
    for (const [k, v] of this.timers) copy.timers.set(k, { key: v.key, times: new Set(v.times) });
    return copy;
  }

  restore(snapshot) {
    Object.assign(this, snapshot);
  }

  slot(name, key = this.key) {
    return `${hex(key)}/${name}`;
  }

  entry(name, bytes) {
    const ttl = this.ttls.get(name);
    return { bytes: Uint8Array.from(bytes), expires: ttl === undefined ? undefined : this.now + ttl };
  }

  live(e) {
    return e.expires === undefined || e.expires > this.now;
  }

  valueGet(name, key = this.key) {
    const e = this.values.get(this.slot(name, key));
    return e && this.live(e) ? e.bytes : undefined;
  }

  valueUpdate(name, bytes) {
    this.values.set(this.slot(name), this.entry(name, bytes));
  }

  valueClear(name) {
    this.values.delete(this.slot(name));
  }

  listGet(name, key = this.key) {
    return (this.lists.get(this.slot(name, key)) ?? []).filter((e) => this.live(e)).map((e) => e.bytes);
  }

  listAppend(name, values) {
    const slot = this.slot(name);
    const list = this.lists.get(slot) ?? [];
    for (const v of values) list.push(this.entry(name, v));
    this.lists.set(slot, list);
  }

  listPut(name, values) {
    this.listClear(name);
    this.listAppend(name, values);
  }

  listClear(name) {
    this.lists.delete(this.slot(name));
  }

  mapGet(name, userKey) {
    const found = this.maps.get(this.slot(name))?.get(hex(userKey));
    return found && this.live(found.entry) ? found.entry.bytes : undefined;
  }

  mapContains(name, userKey) {
    return this.mapGet(name, userKey) !== undefined;
  }

  mapUpdate(name, userKey, value) {
    const slot = this.slot(name);
    const map = this.maps.get(slot) ?? new Map();
    map.set(hex(userKey), { userKey: Uint8Array.from(userKey), entry: this.entry(name, value) });
    this.maps.set(slot, map);
  }

  mapRemove(name, userKey) {
    this.maps.get(this.slot(name))?.delete(hex(userKey));
  }

  /** Live entries [userKey, value] in byte order of the user keys. */
  mapEntries(name, key = this.key) {
    const map = this.maps.get(this.slot(name, key));
    if (!map) return [];
    return [...map.values()]
      .filter((v) => this.live(v.entry))
      .sort((a, b) => compareBytes(a.userKey, b.userKey))
      .map((v) => [v.userKey, v.entry.bytes]);
  }

  mapExists(name) {
    return this.mapEntries(name).length > 0;
  }

  mapKeys(name) {
    return this.mapEntries(name).map(([k]) => k);
  }

  mapValues(name) {
    return this.mapEntries(name).map(([, v]) => v);
  }

  mapClear(name) {
    this.maps.delete(this.slot(name));
  }

  timerRegister(at) {
    const k = hex(this.key);
    const set = this.timers.get(k) ?? { key: this.key, times: new Set() };
    set.times.add(at);
    this.timers.set(k, set);
  }

  timerDelete(at) {
    this.timers.get(hex(this.key))?.times.delete(at);
  }

  /** The timers of `key`, earliest first. */
  timerList(key = this.key) {
    const set = this.timers.get(hex(key));
    return set ? [...set.times].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)) : [];
  }

  /** Every timer with expiry <= clock as [expiry, key], in expiry order then key bytes. */
  dueTimers(clock) {
    const due = [];
    for (const { key, times } of this.timers.values()) for (const at of times) if (at <= clock) due.push([at, key]);
    return due.sort(([a, ka], [b, kb]) => (a < b ? -1 : a > b ? 1 : compareBytes(ka, kb)));
  }

  /** Removes the timer; whether it was there. */
  takeTimer(at, key) {
    return this.timers.get(hex(key))?.times.delete(at) ?? false;
  }
}
