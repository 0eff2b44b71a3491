// Schemas, rows, outputs, the harness's semantics, the component glue (with a fake
// host) and the shipped WIT.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { exportProcessor, installHost, logger, Output, Schema, StatefulProcessor } from '../src/index.js';
import { MemoryStore } from '../src/memory.js';
import { rowsFromWit } from '../src/rows.js';
import { Harness, batch } from '../src/testing.js';

test('the shipped WIT equals the repository contract', () => {
  const shipped = readFileSync(new URL('../wit/processor.wit', import.meta.url), 'utf8');
  const repo = readFileSync(new URL('../../../wit/processor.wit', import.meta.url), 'utf8');
  assert.equal(shipped, repo, 'copy wit/processor.wit to sdks/js/wit/');
});

test('schemas parse and refuse mistakes', () => {
  assert.equal(String(Schema.parse('user STRING NOT NULL, amount bigint')), 'user STRING NOT NULL, amount BIGINT');
  assert.equal(Schema.parse('').length, 0);
  assert.throws(() => Schema.parse('a INTEGER'), /unknown type `INTEGER`/);
  assert.throws(() => Schema.parse('a BIGINT, a STRING'), /two fields named `a`/);
  assert.throws(() => Schema.parse('a BIGINT NULL'), /expected `name TYPE`/);
});

test('rows read by column and by row, with nulls', () => {
  const rows = batch('s STRING, n BIGINT, f DOUBLE NOT NULL, t TIMESTAMP', [
    ['é', 5n, 1.5, 7n],
    [null, null, 2.5, null],
    { s: 'x', n: 9007199254740993n, f: 0 },
  ]);
  assert.deepEqual([...rows.i64s('n')], [5n, 0n, 9007199254740993n]);
  assert.ok(rows.i64s('n') instanceof BigInt64Array);
  assert.deepEqual(rows.strs('s'), ['é', null, 'x']);
  assert.ok(rows.column('n').isNull(1) && rows.column('n').hasNulls() && !rows.column('f').hasNulls());
  const row = rows.row(1);
  assert.equal(row.i64Opt('n'), null);
  assert.throws(() => row.i64('n'), /column `n` is null in row 1; use `row.i64Opt/);
  assert.throws(() => row.str('n'), /column `n` is BIGINT, so `row.str/);
  assert.throws(() => rows.f64s('nope'), /no column `nope` in schema/);
  assert.deepEqual(rows.toObjects()[0], { s: 'é', n: 5n, f: 1.5, t: 7n });
});

test('outputs are checked against the schema and refused whole', () => {
  const out = new Output(Schema.parse('user STRING NOT NULL, n BIGINT, t TIMESTAMP'));
  out.row().set('n', 3n).set('user', 'a').append();
  out.appendRow(['b', null, 7]);
  out.append({ user: 'c', t: new Date(1000) });
  assert.throws(() => out.row().set('n', 1n).append(), /column `user STRING NOT NULL` was not set/);
  assert.throws(() => out.append({ user: 'a', nope: 1 }), /no column `nope`/);
  assert.throws(() => out.appendRow([null, 1n, 2n]), /cannot hold the NULL/);
  assert.throws(() => out.appendRow(['a', 1.5, 2n]), /column `n BIGINT` cannot hold the number 1.5/);
  assert.throws(() => out.appendRow(['a']), /row has 1 values/);
  const wire = out.builder.toWit();
  assert.equal(wire.numRows, 3);
  assert.equal(wire.columns[0].validity, undefined, 'no bitmap without nulls');
  assert.deepEqual([...wire.columns[1].validity], [0b001]);
  assert.deepEqual([...wire.columns[2].values.val], [0n, 7n, 1000000n]);
  const back = rowsFromWit(wire, out.schema);
  assert.deepEqual(back.toArrays(), [['a', 3n, null], ['b', null, 7n], ['c', null, 1000000n]]);
});

test('malformed host batches are refused', () => {
  const schema = Schema.parse('s STRING');
  const col = (data, offsets) => ({ values: { tag: 'utf8', val: { data: new Uint8Array(data), offsets: new Uint32Array(offsets) } } });
  assert.throws(() => rowsFromWit({ numRows: 1, columns: [col([97, 98], [0, 3])] }, schema), /run past/);
  assert.throws(() => rowsFromWit({ numRows: 2, columns: [col([97], [0, 1])] }, schema), /2 offsets for 2 rows/);
  assert.throws(() => rowsFromWit({ numRows: 1, columns: [{ values: { tag: 'int64', val: new BigInt64Array(1) } }] }, schema), /holds BIGINT/);
});

class Sessions extends StatefulProcessor {
  init(ctx) {
    ctx.setTimeMode('processing-time');
    ctx.setOutputSchema('k STRING, fired TIMESTAMP');
    this.seen = ctx.valueState('seen', { type: 'int64', ttl: { seconds: 10 } });
    this.tags = ctx.mapState('tags', { keyType: 'int64', type: 'string' });
    this.timers = ctx.timers();
  }

  handleInputRows(key, rows, tv) {
    this.seen.update((this.seen.get() ?? 0n) + BigInt(rows.length));
    for (const v of rows.i64s('v')) this.tags.update(v, `t${v}`);
    this.timers.register(tv.processingTime + 5_000_000n);
    this.timers.register(tv.processingTime + 5_000_000n);
    logger.info(`${rows.length} row(s) for ${key}`);
    if (rows.i64s('v').includes(-1n)) throw new Error('boom');
  }

  handleExpiredTimer(key, tv, timer, output) {
    output.appendRow([key.str(0), timer.expiryTime]);
    assert.deepEqual(this.timers.list(), [], 'removed before the handler runs');
  }
}

const sessions = () => new Harness(Sessions, { inputSchema: 'k STRING, v BIGINT', keySchema: 'k STRING' });

test('harness: TTL from each write, map byte order, timer dedup and order', () => {
  const h = sessions();
  h.feed('b', [['b', 300n], ['b', 2n], ['b', -2n]]);
  h.setProcessingTime(1_000_000n);
  h.feed('a', [['a', 1n]]);
  assert.deepEqual(h.mapState('tags', 'b').map(([k]) => k), [2n, 300n, -2n], 'encoded keys 02 < 19012c < 21');
  assert.deepEqual(h.timers('b'), [5_000_000n], 'registering twice keeps one timer');
  assert.equal(h.valueState('seen', 'b'), 3n);
  const fired = h.setProcessingTime(6_000_000n);
  assert.deepEqual(fired.toArrays(), [['b', 5_000_000n], ['a', 6_000_000n]], 'expiry order across keys');
  assert.equal(h.valueState('seen', 'b'), 3n);
  h.setProcessingTime(10_000_000n);
  assert.equal(h.valueState('seen', 'b'), undefined, 'expired 10 s after its write');
  assert.equal(h.valueState('seen', 'a'), 1n, 'a was written later');
  assert.throws(() => h.setProcessingTime(0n), /cannot go back/);
});

test('harness: a failed call leaves state and timers as before; logs are captured', () => {
  const h = sessions();
  h.feed('a', [['a', 1n]]);
  assert.throws(() => h.feed('a', [['a', -1n]]), /boom/);
  assert.equal(h.valueState('seen', 'a'), 1n);
  assert.deepEqual(h.mapState('tags', 'a'), [[1n, 't1']]);
  assert.deepEqual(h.timers('a'), [5_000_000n]);
  assert.deepEqual(h.logs, [{ level: 'info', message: '1 row(s) for a' }, { level: 'info', message: '1 row(s) for a' }]);
});

test('state outside a handler and timers without a time mode are refused', () => {
  class Bad extends StatefulProcessor {
    init(ctx) {
      this.v = ctx.valueState('v');
      this.v.get();
    }
  }
  assert.throws(() => new Harness(Bad, { inputSchema: 'a BIGINT', keySchema: 'a BIGINT' }), /init failed: state variable `v` can only be used inside/);
  class NoMode extends StatefulProcessor {
    init(ctx) {
      this.timers = ctx.timers();
    }
    handleInputRows() {
      this.timers.register(1n);
    }
  }
  const h = new Harness(NoMode, { inputSchema: 'a BIGINT', keySchema: 'a BIGINT' });
  assert.throws(() => h.feed(1n, [[1n]]), /timers need a time mode/);
});

test('the component glue converts WIT values and turns throws into error strings', () => {
  const memory = new MemoryStore();
  const logs = [];
  const resource = (kind) =>
    class {
      constructor(name) {
        this.name = name;
      }
      get() {
        return memory.valueGet(this.name);
      }
      update(bytes) {
        memory.valueUpdate(this.name, bytes);
      }
    };
  installHost({
    // Key i of a call is stored as key-i: the calls below rely on that.
    scope: { selectKey(index) { memory.key = new TextEncoder().encode(`key-${index}`); }, takeTimer: () => true },
    state: { ValueState: resource('value') },
    timers: { registerTimer: (at) => memory.timerRegister(at), deleteTimer() {}, listTimers: () => BigInt64Array.from(memory.timerList()) },
    logging: { log: (level, message) => logs.push([level, message]) },
  });
  class Echo extends StatefulProcessor {
    init(ctx) {
      ctx.setOutputSchema('user STRING, total BIGINT');
      this.total = ctx.valueState('total', { type: 'int64', ttl: { hours: 1 } });
    }
    handleInputRows(key, rows) {
      if (key.str(0) === 'bad') throw new TypeError('bad key');
      const total = (this.total.get() ?? 0n) + rows.i64s('n').reduce((a, b) => a + b, 0n);
      this.total.update(total);
      return undefined;
    }
  }
  class EchoOut extends Echo {
    handleInputRows(key, rows, tv, output) {
      super.handleInputRows(key, rows, tv, output);
      output.appendRow([key.str(0), this.total.get()]);
    }
  }
  const handler = exportProcessor(EchoOut);
  const field = (name, dataType) => ({ name, dataType, nullable: true });
  const spec = handler.init({
    inputSchema: [field('user', 'utf8'), field('n', 'int64')],
    keySchema: [field('user', 'utf8')],
    outputMode: 'update',
    initialStateSchema: undefined,
    eventTimeColumn: undefined,
    config: '{}',
    query: { id: 'query-1', runId: 'run-1' },
  });
  assert.deepEqual(spec.state, [{ name: 'total', kind: 'value', ttl: 3_600_000_000n }]);
  assert.equal(spec.timeMode, 'none');
  const rows = { numRows: 2, columns: [
    { values: { tag: 'utf8', val: { data: new Uint8Array([97, 97]), offsets: new Uint32Array([0, 1, 2]) } } },
    { values: { tag: 'int64', val: BigInt64Array.from([2n ** 60n, 5n]) } },
  ] };
  const key = (user, numRows) => ({ key: [{ tag: 'utf8', val: user }], numRows });
  const tv = { batchId: 3n, processingTime: 1n, watermark: undefined };
  const { rows: out, ends } = handler.handleInputRows([key('a', 2)], rows, tv);
  assert.deepEqual(ends, [1]);
  assert.deepEqual([...out.columns[1].values.val], [2n ** 60n + 5n]);
  assert.equal(out.columns[1].values.tag, 'int64');
  // Two keys in one call: each is selected (the first is stored where 'a' was) and
  // handed its own rows.
  const two = handler.handleInputRows([key('b', 1), key('c', 1)], rows, tv);
  assert.deepEqual(two.ends, [1, 2]);
  assert.deepEqual([...two.rows.columns[1].values.val], [2n ** 61n + 5n, 5n]);
  assert.deepEqual([...two.rows.columns[0].values.val.data], [98, 99]);
  let thrown;
  try {
    handler.handleInputRows([key('bad', 2)], rows, tv);
  } catch (e) {
    thrown = e;
  }
  assert.equal(typeof thrown, 'string', 'componentize-js maps a thrown string to err(string)');
  assert.match(thrown, /^TypeError: bad key\nstack:\n.*handleInputRows/s);
  assert.ok(thrown.length <= 3072);
});

test('harness: event-time timers fire on the watermark; late rows are dropped unless accepted', () => {
  class Windows extends StatefulProcessor {
    init(ctx) {
      ctx.setTimeMode('event-time');
      ctx.setOutputSchema('k STRING, n BIGINT');
      ctx.setAcceptsLateRows(ctx.config.late === true);
      this.n = ctx.valueState('n', { type: 'int64' });
      this.timers = ctx.timers();
    }
    handleInputRows(key, rows) {
      this.n.update((this.n.get() ?? 0n) + BigInt(rows.length));
      this.timers.register(100n);
    }
    handleExpiredTimer(key, tv, timer, output) {
      output.appendRow([key.str(), this.n.get()]);
    }
  }
  const make = (late) =>
    new Harness(Windows, { inputSchema: 'k STRING, at TIMESTAMP', keySchema: 'k STRING', eventTimeColumn: 'at', watermark: 50n, config: { late } });
  const h = make(false);
  h.feed('a', [['a', 40n], ['a', 60n], ['a', 50n]]);
  assert.equal(h.valueState('n', 'a'), 1n, 'rows at or before the watermark are dropped');
  assert.equal(h.advanceProcessingTime(1000n).length, 0, 'processing time does not fire event-time timers');
  assert.equal(h.setWatermark(99n).length, 0);
  assert.deepEqual(h.setWatermark(100n).toArrays(), [['a', 1n]]);
  assert.throws(() => h.setWatermark(10n), /cannot go back/);
  const accepting = make(true);
  accepting.feed('a', [['a', 40n], ['a', 60n]]);
  assert.equal(accepting.valueState('n', 'a'), 2n);
});
