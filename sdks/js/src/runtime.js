// The component glue: turns a StatefulProcessor class into the object the WIT
// `handler` export needs, and the host backend over the WIT imports. The build
// wrapper's entry module installs the imports with `installHost` before any call.

import { InitContext } from './context.js';
import { log, setLogSink } from './log.js';
import { Driver, errorMessage } from './processor.js';
import { keyFromWit, rowsFromWit } from './rows.js';
import { EddyError, Field, Schema } from './schema.js';
import { Store } from './state.js';
import { batchIn, batchOut, in64, keyIn, out64, setInt64AsNumber } from './wide.js';

let host;

/**
 * Installs the WIT imports `{scope, state, timers, logging}` (done by the generated entry
 * module); `int64AsNumber` says that the engine passes s64 values as numbers (QuickJS).
 */
export function installHost(imports) {
  host = imports;
  setInt64AsNumber(imports.int64AsNumber);
  setLogSink((level, message) => imports.logging.log(level, message));
}

function requireHost() {
  if (!host) {
    throw new EddyError(
      'the eddy host imports are not installed: build the component with eddy-guest-build, ' +
        'or use eddy-guest/testing to run the processor natively',
    );
  }
  return host;
}

/** `list<u8>` from the host as a Uint8Array (engines may hand over plain arrays). */
const asBytes = (value) => (value === undefined || value === null || value instanceof Uint8Array ? value ?? undefined : Uint8Array.from(value));

/** State and timers through the WIT imports; resources are opened once per variable. */
class HostBackend {
  constructor() {
    this.values = new Map();
    this.lists = new Map();
    this.maps = new Map();
  }

  open(cache, Resource, name) {
    let handle = cache.get(name);
    if (!handle) {
      handle = new Resource(name);
      cache.set(name, handle);
    }
    return handle;
  }

  value(name) {
    return this.open(this.values, requireHost().state.ValueState, name);
  }

  list(name) {
    return this.open(this.lists, requireHost().state.ListState, name);
  }

  map(name) {
    return this.open(this.maps, requireHost().state.MapState, name);
  }

  valueGet(name) {
    return asBytes(this.value(name).get());
  }

  valueUpdate(name, bytes) {
    this.value(name).update(bytes);
  }

  valueClear(name) {
    this.value(name).clear();
  }

  listGet(name) {
    return Array.from(this.list(name).get(), asBytes);
  }

  listAppend(name, values) {
    this.list(name).append(values);
  }

  listPut(name, values) {
    this.list(name).put(values);
  }

  listClear(name) {
    this.list(name).clear();
  }

  mapGet(name, key) {
    return asBytes(this.map(name).get(key));
  }

  mapContains(name, key) {
    return this.map(name).contains(key);
  }

  mapUpdate(name, key, value) {
    this.map(name).update(key, value);
  }

  mapRemove(name, key) {
    this.map(name).remove(key);
  }

  mapExists(name) {
    return this.map(name).exists();
  }

  mapKeys(name) {
    return Array.from(this.map(name).keys(), asBytes);
  }

  mapValues(name) {
    return Array.from(this.map(name).values(), asBytes);
  }

  mapEntries(name) {
    return Array.from(this.map(name).iterator(), ([k, v]) => [asBytes(k), asBytes(v)]);
  }

  mapClear(name) {
    this.map(name).clear();
  }

  timerRegister(at) {
    requireHost().timers.registerTimer(out64(at, 'timer'));
  }

  timerDelete(at) {
    requireHost().timers.deleteTimer(out64(at, 'timer'));
  }

  timerList() {
    return Array.from(requireHost().timers.listTimers(), (at) => in64(at, 'timer'));
  }

  /** Makes key `index` of the current call the current key. */
  selectKey(index) {
    requireHost().scope.selectKey(index);
  }

  /** Takes due timer `index` of the current call (which selects its key): whether it fires. */
  takeTimer(index) {
    return requireHost().scope.takeTimer(index);
  }
}

/** Rows `start..end` of a WIT row batch (after `batchIn`), as a batch of their own. */
function sliceBatch(batch, start, end) {
  if (start === 0 && end === batch.numRows) return batch;
  const columns = batch.columns.map(({ values: { tag, val }, validity }) => {
    let sliced;
    if (tag === 'utf8' || tag === 'binary') {
      const base = val.offsets[start];
      const offsets = Uint32Array.from(val.offsets.slice(start, end + 1), (o) => o - base);
      sliced = { data: val.data.slice(base, val.offsets[end]), offsets };
    } else {
      sliced = val.slice(start, end);
    }
    let bits;
    if (validity) {
      bits = new Uint8Array(Math.ceil((end - start) / 8));
      for (let row = start; row < end; row++) {
        if ((validity[row >> 3] >> (row & 7)) & 1) bits[(row - start) >> 3] |= 1 << ((row - start) & 7);
      }
    }
    return { values: { tag, val: sliced }, validity: bits };
  });
  return { numRows: end - start, columns };
}

/** A WIT `list<field>` as a Schema. */
export function schemaFromWit(fields, what) {
  try {
    return new Schema(fields.map((f) => new Field(f.name, f.dataType, f.nullable)));
  } catch (e) {
    throw new EddyError(`the host's ${what}: ${e.message}`);
  }
}

/** A Schema as a WIT `list<field>`. */
export function schemaToWit(schema) {
  return schema.fields.map((f) => ({ name: f.name, dataType: f.dataType, nullable: f.nullable }));
}

/** What init declared, as a WIT processor-spec. */
export function specToWit(spec) {
  return {
    state: spec.state.map((d) => ({ name: d.name, kind: d.kind, ttl: out64(d.ttl, `the TTL of \`${d.name}\``) })),
    outputSchema: schemaToWit(spec.outputSchema),
    timeMode: spec.timeMode,
    acceptsLateRows: spec.acceptsLateRows,
    deletedState: spec.deletedState,
  };
}

function timerValuesFromWit(tv) {
  return Object.freeze({
    batchId: in64(tv.batchId, 'batch id'),
    processingTime: in64(tv.processingTime, 'processing time'),
    watermark: tv.watermark === undefined || tv.watermark === null ? undefined : in64(tv.watermark, 'watermark'),
  });
}

/** Runs `call`; anything thrown becomes the string the WIT `result` carries as its error. */
function guarded(call) {
  try {
    return call();
  } catch (error) {
    throw errorMessage(error); // componentize-js turns a thrown string into `err(string)`
  }
}

/**
 * Makes a StatefulProcessor class the component's processor. In the app's entry
 * module: `export const handler = exportProcessor(MyProcessor);`
 */
export function exportProcessor(Processor) {
  if (typeof Processor !== 'function') {
    throw new TypeError('exportProcessor takes the processor class, e.g. exportProcessor(RunningCount)');
  }
  let driver;
  const current = () => {
    if (!driver) throw new EddyError('the processor is not initialized: the host must call init first');
    return driver;
  };
  return {
    init(context) {
      return guarded(() => {
        const store = new Store(new HostBackend());
        const ctx = new InitContext(
          {
            inputSchema: schemaFromWit(context.inputSchema, 'input schema'),
            keySchema: schemaFromWit(context.keySchema, 'key schema'),
            outputMode: context.outputMode,
            config: context.config,
            eventTimeColumn: context.eventTimeColumn,
            initialStateSchema: context.initialStateSchema && schemaFromWit(context.initialStateSchema, 'initial-state schema'),
            queryInfo: { id: context.query.id, runId: context.query.runId },
          },
          store,
        );
        driver = new Driver(Processor, ctx);
        return specToWit(driver.spec);
      });
    },

    // Each key of the call is selected before its rows are handled.
    handleInputRows(keys, rows, timerValues) {
      return guarded(() => {
        const d = current();
        const all = batchIn(rows);
        const held = keys.reduce((sum, k) => sum + Number(k.numRows), 0);
        if (held !== all.numRows) throw new EddyError(`the host handed over ${all.numRows} rows for keys that hold ${held}`);
        const tv = timerValuesFromWit(timerValues);
        const output = d.output();
        const ends = [];
        let start = 0;
        for (const [index, keyRows] of keys.entries()) {
          if (output.callIsFull()) break; // the host hands the remaining keys over in another call
          const end = start + Number(keyRows.numRows);
          d.store.backend.selectKey(index);
          const batch = rowsFromWit(sliceBatch(all, start, end), d.inputSchema);
          d.handleInputRows(keyFromWit(keyIn(keyRows.key)), batch, tv, output);
          ends.push(output.endHandler());
          start = end;
        }
        return { rows: batchOut(output.builder.toWit()), ends };
      });
    },

    // Each due timer is taken (which selects its key) before it is handled; a timer an
    // earlier handler of the call deleted is not handed over.
    handleExpiredTimers(keys, timers, timerValues) {
      return guarded(() => {
        const d = current();
        const callKeys = keys.map((key) => keyFromWit(keyIn(key)));
        const tv = timerValuesFromWit(timerValues);
        const output = d.output();
        const ends = [];
        for (const [index, timer] of timers.entries()) {
          if (output.callIsFull()) break; // the host hands the remaining timers over in another call
          if (d.store.backend.takeTimer(index)) {
            const key = callKeys[timer.keyIndex];
            d.handleExpiredTimer(key, tv, { expiryTime: in64(timer.expiryTime, 'timer') }, output);
          }
          ends.push(output.endHandler());
        }
        return { rows: batchOut(output.builder.toWit()), ends };
      });
    },

    handleInitialState(key, rows, timerValues) {
      guarded(() => {
        const d = current();
        const batch = rowsFromWit(batchIn(rows), d.spec.initialStateSchema);
        d.handleInitialState(keyFromWit(keyIn(key)), batch, timerValuesFromWit(timerValues));
      });
    },

    close() {
      const d = driver;
      driver = undefined;
      if (!d) return;
      // `close` has no error result: a throw here would trap the instance.
      try {
        d.close();
      } catch (error) {
        try {
          log('error', `close failed: ${errorMessage(error)}`);
        } catch {
          // Nothing more can be reported.
        }
      }
    },
  };
}
