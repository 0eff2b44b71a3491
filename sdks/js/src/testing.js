// A native test harness: run a processor under `node --test`, no WASM.
//
// The Harness runs a StatefulProcessor against an in-memory store with the host's
// semantics (see memory.js). Timers fire in expiry order once their clock reaches
// them: processing-time timers when the processing time does, event-time timers
// when the watermark does; a timer is removed before its handler runs. Like a failed
// batch on the host, a handler call that throws leaves state and timers as they were.
// runBatch runs one micro-batch exactly as the host does (rows, then due timers, all or
// nothing); the shared cases in sdks/conformance/ check it against the host.

import { Writer } from './cbor.js';
import { InitContext } from './context.js';
import { captureStart, captureTake } from './log.js';
import { MemoryStore } from './memory.js';
import { BatchBuilder } from './output.js';
import { Driver } from './processor.js';
import { Key } from './rows.js';
import { EddyError, Schema } from './schema.js';
import { Store, micros } from './state.js';
import { Codec } from './types.js';
import { ttlMicros } from './context.js';

/** Rows in schema `ddl` made of `rows` (arrays in schema order, or objects by column name). */
export function batch(ddl, rows) {
  return build(Schema.parse(ddl), rows, 'row');
}

function build(schema, rows, what) {
  const builder = new BatchBuilder(schema);
  rows.forEach((row, i) => {
    const values = Array.isArray(row) ? row : schema.fields.map((f) => (row && f.name in row ? row[f.name] : null));
    try {
      builder.append(values);
    } catch (e) {
      throw new EddyError(`${what} ${i}: ${e.message}`);
    }
  });
  return builder.finish();
}

const VARIANTS = { boolean: 'Boolean', int64: 'Int64', float64: 'Float64', utf8: 'Utf8', binary: 'Binary', timestamp: 'Timestamp' };

/** The key as the Rust harness encodes it (serde's Vec<Value>), so timers order the same. */
function encodeKey(key) {
  const w = new Writer();
  w.head(4, key.parts.length);
  for (const { dataType, value } of key.parts) {
    if (dataType === null) {
      w.text('Null');
      continue;
    }
    w.head(5, 1);
    w.text(VARIANTS[dataType]);
    if (dataType === 'float64') w.float(value);
    else if (dataType === 'utf8') w.text(value);
    else if (dataType === 'boolean') w.bool(value);
    else if (dataType === 'binary') {
      w.head(4, value.length);
      for (const b of value) w.int(b);
    } else w.int(value);
  }
  return w.finish();
}

/** Runs one processor natively with in-memory state and controllable clocks. */
export class Harness {
  /**
   * Runs the processor's init. Options: `inputSchema`, `keySchema` (DDL strings,
   * required), `outputMode` ("append"), `config` (object or JSON text), `processingTime`
   * and `watermark` (bigint micros), `initialStateSchema`, `eventTimeColumn`, `queryInfo`
   * (`{id, runId}`). Set `batchId` (a bigint, 0n at first) as the host's next batch would.
   */
  constructor(Processor, options) {
    const { inputSchema, keySchema, outputMode = 'append', config = '{}', processingTime = 0n, watermark } = options ?? {};
    if (inputSchema === undefined || keySchema === undefined) {
      throw new EddyError('Harness needs {inputSchema, keySchema}, e.g. {inputSchema: "user STRING, amount BIGINT", keySchema: "user STRING"}');
    }
    this.memory = new MemoryStore();
    this.processingTimeMicros = micros(processingTime, 'processingTime');
    this.memory.now = this.processingTimeMicros;
    this.watermarkMicros = watermark === undefined ? undefined : micros(watermark, 'watermark');
    this.eventTimeColumn = options.eventTimeColumn;
    /** The batch id handlers see in their timer values. */
    this.batchId = 0n;
    /** Whether a runBatch batch went through (the first judges late rows by its own watermark). */
    this.ranBatch = false;
    this.keySchema = Schema.parse(keySchema);
    this.logs = [];
    const store = new Store(this.memory);
    const ctx = new InitContext(
      {
        inputSchema: Schema.parse(inputSchema),
        keySchema: this.keySchema,
        outputMode,
        config: typeof config === 'string' ? config : JSON.stringify(config),
        eventTimeColumn: this.eventTimeColumn,
        initialStateSchema: options.initialStateSchema === undefined ? undefined : Schema.parse(options.initialStateSchema),
        queryInfo: options.queryInfo,
      },
      store,
    );
    captureStart();
    try {
      this.driver = new Driver(Processor, ctx);
    } catch (e) {
      if (e instanceof Error) e.message = `init failed: ${e.message}`;
      throw e;
    } finally {
      this.logs.push(...captureTake());
    }
    this.memory.ttls = new Map(this.driver.spec.state.map((d) => [d.name, d.ttl]));
  }

  /** The processor under test. */
  get processor() {
    return this.driver.processor;
  }

  /** What init declared: `{state, outputSchema, timeMode, acceptsLateRows, initialStateSchema}`. */
  get spec() {
    return this.driver.spec;
  }

  get processingTime() {
    return this.processingTimeMicros;
  }

  get watermark() {
    return this.watermarkMicros;
  }

  timerValues() {
    return Object.freeze({ batchId: this.batchId, processingTime: this.processingTimeMicros, watermark: this.watermarkMicros });
  }

  /** The key of `parts` (an array, or one value) checked against the key schema. */
  key(parts) {
    const values = Array.isArray(parts) ? parts : [parts];
    const rows = build(this.keySchema, [values], 'key');
    const key = new Key(this.keySchema.fields.map((f, i) => {
      const value = rows.column(i).get(0);
      return { dataType: value === null ? null : f.dataType, value };
    }));
    return { key, bytes: encodeKey(key) };
  }

  /** Runs one handler call for `keyBytes`; a throw restores `snapshot` and is rethrown. */
  call(keyBytes, snapshot, fn) {
    this.memory.key = keyBytes;
    this.memory.now = this.processingTimeMicros;
    captureStart();
    try {
      return fn(this.timerValues());
    } catch (e) {
      this.memory.restore(snapshot);
      throw e;
    } finally {
      this.logs.push(...captureTake());
    }
  }

  /**
   * Calls handleInputRows for `key` with `rows` at the current clocks and returns the
   * rows it output. As on the host, late rows (event time at or before the watermark)
   * are dropped first unless the processor accepts them; if none is left, the
   * processor is not called.
   */
  feed(key, rows) {
    const all = build(this.driver.inputSchema, rows, 'input row');
    const keep = this.onTime(all, this.watermarkMicros);
    if (keep.length === 0 && all.length > 0) return this.driver.output().builder.finish();
    const input = keep.length === all.length ? all : build(this.driver.inputSchema, keep.map((i) => all.row(i).toArray()), 'input row');
    const { key: k, bytes } = this.key(key);
    const output = this.driver.output();
    this.call(bytes, this.memory.snapshot(), (tv) => this.driver.handleInputRows(k, input, tv, output));
    return output.builder.finish();
  }

  onTime(rows, watermark) {
    const all = Array.from({ length: rows.length }, (_, i) => i);
    if (this.eventTimeColumn === undefined || watermark === undefined || this.driver.spec.acceptsLateRows) return all;
    const index = this.driver.inputSchema.indexOf(this.eventTimeColumn);
    if (index < 0) throw new EddyError(`the event-time column \`${this.eventTimeColumn}\` is not in the input schema`);
    const column = rows.column(index);
    return all.filter((i) => {
      const at = column.get(i);
      return !(typeof at === 'bigint' && at <= watermark);
    });
  }

  /** Calls handleInitialState for `key` with `rows` in the initial-state schema. */
  initialState(key, rows) {
    const schema = this.driver.spec.initialStateSchema;
    if (!schema) {
      throw new EddyError('no initial-state schema: pass {initialStateSchema: "..."} to the Harness to feed initial state');
    }
    const input = build(schema, rows, 'initial-state row');
    const { key: k, bytes } = this.key(key);
    this.call(bytes, this.memory.snapshot(), (tv) => this.driver.handleInitialState(k, input, tv));
  }

  /** Moves the processing time forward (`{seconds: 5}`-style or bigint micros) and fires due timers. */
  advanceProcessingTime(by) {
    const delta = typeof by === 'object' ? ttlMicros('advanceProcessingTime', by) : micros(by, 'advanceProcessingTime');
    return this.setProcessingTime(this.processingTimeMicros + delta);
  }

  /** Sets the processing time (never backwards) and fires processing-time timers <= it. */
  setProcessingTime(at) {
    const now = micros(at, 'processing time');
    if (now < this.processingTimeMicros) {
      throw new EddyError(`processing time cannot go back from ${this.processingTimeMicros} to ${now}`);
    }
    this.processingTimeMicros = now;
    this.memory.now = now;
    return this.fire('processing-time', now);
  }

  /** Sets the watermark (never backwards) and fires event-time timers <= it. */
  setWatermark(at) {
    const w = micros(at, 'watermark');
    if (this.watermarkMicros !== undefined && w < this.watermarkMicros) {
      throw new EddyError(`the watermark cannot go back from ${this.watermarkMicros} to ${w}`);
    }
    this.watermarkMicros = w;
    return this.fire('event-time', w);
  }

  fire(mode, clock) {
    const output = this.driver.output();
    this.fireInto(mode, clock, this.memory.snapshot(), output);
    return output.builder.finish();
  }

  fireInto(mode, clock, snapshot, output) {
    if (this.driver.spec.timeMode !== mode || clock === undefined) return;
    for (const [expiryTime, keyBytes] of this.memory.dueTimers(clock)) {
      if (!this.memory.takeTimer(expiryTime, keyBytes)) continue; // deleted by an earlier handler
      const key = this.keyFromBytes(keyBytes);
      this.call(keyBytes, snapshot, (tv) => this.driver.handleExpiredTimer(key, tv, Object.freeze({ expiryTime }), output));
    }
  }

  /**
   * Runs one micro-batch as the host does and returns its output: `{processingTime,
   * watermark, keys}` (bigint micros; neither clock goes back; `keys` an array of
   * [key, rows]). Each key's rows go to one handleInputRows call — late rows dropped
   * first, judged by the previous batch's watermark (the first batch's own), unless the
   * processor accepts late rows; a key left without rows is not called — then every
   * timer due at the batch's clock (the processing time, or the watermark for event-time
   * timers) fires, in expiry order. A timer a handler registers that is already due
   * fires in the next batch. Like the host, a batch with a failing call keeps nothing:
   * state, timers, clocks and batchId stay as they were (the error is rethrown).
   * batchId counts the batches that went through.
   */
  runBatch({ processingTime, watermark, keys = [] }) {
    const now = micros(processingTime, 'processing time');
    const mark = watermark === undefined || watermark === null ? undefined : micros(watermark, 'watermark');
    if (now < this.processingTimeMicros) {
      throw new EddyError(`processing time cannot go back from ${this.processingTimeMicros} to ${now}`);
    }
    if (this.watermarkMicros !== undefined && (mark === undefined || mark < this.watermarkMicros)) {
      throw new EddyError(`the watermark cannot go back from ${this.watermarkMicros} to ${mark}`);
    }
    const lateRowsWatermark = this.ranBatch ? this.watermarkMicros : mark;
    const clocks = [this.processingTimeMicros, this.watermarkMicros];
    [this.processingTimeMicros, this.watermarkMicros] = [now, mark];
    this.memory.now = now;
    const snapshot = this.memory.snapshot();
    const output = this.driver.output();
    try {
      for (const [key, rows] of keys) {
        const all = build(this.driver.inputSchema, rows, 'input row');
        const keep = this.onTime(all, lateRowsWatermark);
        if (keep.length === 0) continue;
        const input = keep.length === all.length ? all : build(this.driver.inputSchema, keep.map((i) => all.row(i).toArray()), 'input row');
        const { key: k, bytes } = this.key(key);
        this.call(bytes, snapshot, (tv) => this.driver.handleInputRows(k, input, tv, output));
      }
      const mode = this.driver.spec.timeMode;
      this.fireInto(mode, mode === 'event-time' ? mark : now, snapshot, output);
    } catch (e) {
      this.memory.restore(snapshot);
      [this.processingTimeMicros, this.watermarkMicros] = clocks;
      this.memory.now = clocks[0];
      throw e;
    }
    this.batchId += 1n;
    this.ranBatch = true;
    return output.builder.finish();
  }

  keyFromBytes(bytes) {
    const codec = new Codec('any');
    const parts = codec.decode(bytes).map((part, i) => {
      if (part === 'Null') return { dataType: null, value: null };
      const [[variant, value]] = [...part];
      const dataType = this.keySchema.fields[i].dataType;
      if (VARIANTS[dataType] !== variant) throw new EddyError(`internal: key part ${i} is ${variant}`);
      return { dataType, value: dataType === 'binary' ? Uint8Array.from(value, Number) : value };
    });
    return new Key(parts);
  }

  decl(name, kind) {
    const decl = this.driver.spec.state.find((d) => d.name === name);
    if (!decl || decl.kind !== kind) throw new EddyError(`the processor declared no ${kind} state variable \`${name}\``);
    return decl.handle;
  }

  /** `key`'s live value of the value state `name` (decoded with its declared type), or undefined. */
  valueState(name, key) {
    const handle = this.decl(name, 'value');
    const bytes = this.memory.valueGet(name, this.key(key).bytes);
    return bytes === undefined ? undefined : handle.codec.decode(bytes, name);
  }

  /** `key`'s live elements of the list state `name`, oldest first. */
  listState(name, key) {
    const handle = this.decl(name, 'list');
    return this.memory.listGet(name, this.key(key).bytes).map((b) => handle.codec.decode(b, name));
  }

  /** `key`'s live entries [k, v] of the map state `name`, in key order. */
  mapState(name, key) {
    const handle = this.decl(name, 'map');
    return this.memory
      .mapEntries(name, this.key(key).bytes)
      .map(([k, v]) => [handle.keyCodec.decode(k, name), handle.codec.decode(v, name)]);
  }

  /** The stored bytes of `key`'s value state `name` (to compare with another language's encoding). */
  rawValueState(name, key) {
    return this.memory.valueGet(name, this.key(key).bytes);
  }

  /** `key`'s registered timers (bigint micros), earliest first. */
  timers(key) {
    return this.memory.timerList(this.key(key).bytes);
  }

  /** Calls the processor's close. */
  close() {
    this.driver.close();
  }
}
