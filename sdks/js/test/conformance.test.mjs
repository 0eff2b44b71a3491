// The shared state and timer cases (sdks/conformance/*.json, checked against the host by
// tests/tests/conformance.rs) played by the harness: a JavaScript port of the `scripted`
// test guest's state and timer commands runs each step as one Harness.runBatch.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { StatefulProcessor } from '../src/index.js';
import { Harness } from '../src/testing.js';

const CASES = new URL('../../conformance/', import.meta.url);

/** A result as JSON values (bigints as numbers, undefined as null). */
const plain = (value) => JSON.parse(JSON.stringify(value ?? null, (_, v) => (typeof v === 'bigint' ? Number(v) : v)));

/**
 * Runs one command per input row (`key, op, name, k, v[, at]`); outputs `key, op, result`
 * for reads (the result as JSON) and for fired timers.
 */
class Interpreter extends StatefulProcessor {
  init(ctx) {
    const config = ctx.config;
    ctx.setTimeMode(config.time_mode ?? 'none');
    ctx.setAcceptsLateRows(config.accepts_late_rows === true);
    ctx.setOutputSchema('key STRING, op STRING, result STRING');
    this.vars = new Map();
    for (const { name, kind, ttl_ms: ttlMs } of config.state ?? []) {
      const ttl = ttlMs === undefined ? undefined : BigInt(ttlMs) * 1000n;
      const declare = { value: () => ctx.valueState(name, { type: 'string', ttl }), list: () => ctx.listState(name, { type: 'string', ttl }) }[kind];
      this.vars.set(name, declare ? declare() : ctx.mapState(name, { keyType: 'string', type: 'string', ttl }));
    }
    this.timers = ctx.timers();
    this.batchId = 0n;
  }

  /** Runs one command: its result for a read, `undefined` for a write. */
  run({ op, name, k, v }) {
    const state = this.vars.get(name);
    const list = () => (v.trimStart().startsWith('[') ? JSON.parse(v) : [v]);
    const reads = {
      'value.get': () => state.get(),
      'value.exists': () => state.exists(),
      'list.get': () => state.get(),
      'list.exists': () => state.exists(),
      'map.get': () => state.get(k),
      'map.contains': () => state.contains(k),
      'map.keys': () => state.keys(),
      'map.values': () => state.values(),
      'map.exists': () => state.exists(),
      'timer.list': () => this.timers.list(),
      'batch.id': () => this.batchId,
    };
    const writes = {
      'value.set': () => state.update(v),
      'value.clear': () => state.clear(),
      'list.append': () => state.appendList(list()),
      'list.put': () => state.put(list()),
      'list.clear': () => state.clear(),
      'map.put': () => state.update(k, v),
      'map.remove': () => state.remove(k),
      'map.clear': () => state.clear(),
      'timer.register': () => this.timers.register(BigInt(v)),
      'timer.delete': () => this.timers.delete(BigInt(v)),
      fail: () => {
        throw new Error(v ?? 'scripted failure');
      },
    };
    if (op in reads) return { result: reads[op]() };
    if (!(op in writes)) throw new Error(`unknown op \`${op}\``);
    writes[op]();
    return undefined;
  }

  handleInputRows(key, rows, tv, output) {
    this.batchId = tv.batchId;
    for (const row of rows.toObjects()) {
      const read = this.run(row);
      if (read) output.appendRow([key.str(0), row.op, JSON.stringify(plain(read.result))]);
    }
  }

  handleExpiredTimer(key, tv, timer, output) {
    const at = timer.expiryTime;
    if (at % 10n === 1n) {
      this.timers.delete(at + 1n);
      this.timers.register(at + 2n);
    } else if (at % 10n === 7n || at % 10n === 8n) {
      throw new Error(`timer ${at} failed`);
    }
    output.appendRow([key.str(0), 'timer.fired', String(at)]);
  }
}

function cases() {
  const files = readdirSync(CASES).filter((name) => name.endsWith('.json')).sort();
  return files.flatMap((file) => JSON.parse(readFileSync(new URL(file, CASES), 'utf8')).cases.map((c) => [file, c]));
}

function checkState(at, h, kase, step) {
  const kinds = new Map((kase.config.state ?? []).map((d) => [d.name, d.kind]));
  for (const [key, vars] of Object.entries(step.state ?? {})) {
    for (const [name, expected] of Object.entries(vars)) {
      const read = { value: () => h.valueState(name, key), list: () => h.listState(name, key) }[kinds.get(name)];
      assert.deepEqual(plain(read ? read() : h.mapState(name, key)), expected, `${at}: key ${key}'s \`${name}\``);
    }
  }
  for (const [key, expected] of Object.entries(step.timers ?? {})) {
    assert.deepEqual(plain(h.timers(key)), expected, `${at}: key ${key}'s timers`);
  }
}

test('the shared cases are found', () => {
  assert.ok(cases().length >= 10, `${CASES.pathname} holds the shared cases`);
});

for (const [file, kase] of cases()) {
  test(`the harness plays the shared case ${file}: ${kase.name}`, () => {
    const eventTime = kase.event_time === true;
    const inputSchema = `key STRING, op STRING, name STRING, k STRING, v STRING${eventTime ? ', at TIMESTAMP' : ''}`;
    const h = new Harness(Interpreter, { inputSchema, keySchema: 'key STRING', config: kase.config, eventTimeColumn: eventTime ? 'at' : undefined });
    kase.steps.forEach((step, i) => {
      const at = `${kase.name} step ${i}`;
      const keys = Object.entries(step.rows ?? {}).map(([key, commands]) => [
        key,
        commands.map((c) => {
          const row = [key, c.op, c.name ?? null, c.k ?? null, c.v ?? null];
          return eventTime ? [...row, c.at === undefined ? null : BigInt(c.at)] : row;
        }),
      ]);
      const watermark = step.watermark === undefined || step.watermark === null ? undefined : BigInt(step.watermark);
      let out;
      try {
        out = h.runBatch({ processingTime: BigInt(step.processing_time), watermark, keys });
      } catch (e) {
        assert.ok(step.error !== undefined, `${at}: the batch failed: ${e}`);
        assert.ok(String(e).includes(step.error), `${at}: \`${e}\` does not say \`${step.error}\``);
      }
      if (out) {
        assert.equal(step.error, undefined, `${at}: expected the error \`${step.error}\``);
        const seen = {};
        for (const [key, op, result] of out.toArrays()) (seen[key] ??= []).push([op, JSON.parse(result)]);
        const expected = Object.fromEntries(Object.entries(step.output ?? {}).filter(([, rows]) => rows.length > 0));
        assert.deepEqual(seen, expected, `${at}: output`);
      }
      checkState(at, h, kase, step);
    });
  });
}
