// What init receives and declares.

import { EddyError, Schema } from './schema.js';
import { ListState, MapState, Timers, ValueState } from './state.js';

const TIME_MODES = ['none', 'processing-time', 'event-time'];
const OUTPUT_MODES = ['append', 'update', 'complete'];

/** A TTL in microseconds (bigint) from a spec: `{seconds}`, `{millis}`, `{micros}`, or a bigint of micros. */
export function ttlMicros(name, ttl) {
  if (ttl === undefined || ttl === null) return undefined;
  let micros;
  if (typeof ttl === 'bigint') micros = ttl;
  else if (typeof ttl === 'object') {
    const units = { micros: 1, millis: 1e3, seconds: 1e6, minutes: 6e7, hours: 3.6e9, days: 8.64e10 };
    const keys = Object.keys(ttl);
    const unit = keys[0];
    if (keys.length !== 1 || !(unit in units) || typeof ttl[unit] !== 'number' || !(ttl[unit] >= 0)) {
      throw new EddyError(
        `state variable \`${name}\` has an invalid ttl ${JSON.stringify(ttl)}; use e.g. {hours: 24}, {seconds: 30} or a bigint of microseconds`,
      );
    }
    micros = BigInt(Math.round(ttl[unit] * units[unit]));
  } else {
    throw new EddyError(`state variable \`${name}\`: ttl must be e.g. {hours: 24} or a bigint of microseconds`);
  }
  if (micros <= 0n) throw new EddyError(`state variable \`${name}\` has a zero TTL; leave ttl out for no expiry`);
  return micros > 0xffffffffffffffffn ? 0xffffffffffffffffn : micros;
}

/**
 * What `init` receives: the query's schemas, output mode and config, and where the
 * processor declares its state variables, output schema and time mode.
 */
export class InitContext {
  constructor({ inputSchema, keySchema, outputMode, config, eventTimeColumn, initialStateSchema, queryInfo }, store) {
    /** The query and run the processor is part of (Spark's `getQueryInfo`): `{id, runId}`; the batch id is in each handler's timer values. */
    this.queryInfo = Object.freeze(queryInfo ?? { id: 'harness-query', runId: 'harness-run' });
    this.inputSchema = inputSchema;
    this.keySchema = keySchema;
    this.outputMode = outputMode;
    this.configJson = config && config.trim() ? config : '{}';
    this.eventTimeColumn = eventTimeColumn ?? undefined;
    this.store = store;
    this.spec = {
      state: [],
      outputSchema: new Schema([]),
      timeMode: 'none',
      acceptsLateRows: false,
      deletedState: [],
      initialStateSchema: initialStateSchema ?? undefined,
    };
  }

  /** The operator's config table from the pipeline spec, parsed from JSON. */
  get config() {
    try {
      return JSON.parse(this.configJson);
    } catch (e) {
      throw new EddyError(`invalid processor config ${this.configJson}: ${e.message}; fix the operator's \`config\` table in the pipeline spec`);
    }
  }

  declare(name, kind, ttl, handle) {
    if (typeof name !== 'string' || !name) throw new EddyError('a state variable needs a non-empty name');
    if (this.spec.state.some((d) => d.name === name)) {
      throw new EddyError(`state variable \`${name}\` is declared twice; give each variable its own name`);
    }
    this.spec.state.push({ name, kind, ttl: ttlMicros(name, ttl), handle });
  }

  /** Declares a value state variable: `ctx.valueState("totals", {type: {count: "int64"}, ttl: {hours: 1}})`. */
  valueState(name, { type, ttl } = {}) {
    const handle = new ValueState(name, this.store, type);
    this.declare(name, 'value', ttl, handle);
    return handle;
  }

  /** Declares a list state variable (elements of `type`). */
  listState(name, { type, ttl } = {}) {
    const handle = new ListState(name, this.store, type);
    this.declare(name, 'list', ttl, handle);
    return handle;
  }

  /** Declares a map state variable (user keys of `keyType`, values of `type`). */
  mapState(name, { keyType, type, ttl } = {}) {
    const handle = new MapState(name, this.store, keyType, type);
    this.declare(name, 'map', ttl, handle);
    return handle;
  }

  /** The timers handle; timers need a time mode other than "none". */
  timers() {
    return new Timers(this.store);
  }

  /** Declares the output schema, e.g. `"user STRING, count BIGINT"` (empty by default). */
  setOutputSchema(schema) {
    this.spec.outputSchema = Schema.parse(schema);
  }

  /** Declares how timers are driven: "none" (default), "processing-time" or "event-time". */
  setTimeMode(mode) {
    if (!TIME_MODES.includes(mode)) throw new EddyError(`unknown time mode ${JSON.stringify(mode)}; use one of ${TIME_MODES.join(', ')}`);
    this.spec.timeMode = mode;
    this.store.timeMode = mode;
  }

  /** Asks the host to hand over late rows instead of dropping them. */
  /**
   * Deletes the data of state variable `name`, which an earlier version of this
   * processor declared and this one no longer does (Spark's `deleteIfExists`): the host
   * deletes it with the next batch instead of refusing the checkpoint. A name the
   * checkpoint does not hold is ignored; do not also declare it.
   */
  deleteIfExists(name) {
    if (!this.spec.deletedState.includes(name)) this.spec.deletedState.push(String(name));
  }

  setAcceptsLateRows(accepts) {
    this.spec.acceptsLateRows = Boolean(accepts);
  }

  /** Sets the schema of initial-state rows (the host sets it from the pipeline; a call replaces it). */
  setInitialStateSchema(schema) {
    this.spec.initialStateSchema = Schema.parse(schema);
  }
}

export { OUTPUT_MODES, TIME_MODES };
