// The base class processor authors extend, and the driver that runs one.

import { EddyError } from './schema.js';
import { Output } from './output.js';

/**
 * Per-key stateful logic, like Spark's StatefulProcessor in transformWithState.
 *
 * The host creates one long-lived instance per operator shard and calls `init(ctx)`
 * once, then `handleInputRows` once per key per batch with that key's new rows,
 * `handleExpiredTimer` once per expired timer and `handleInitialState` once per key
 * with initial state. State and timers are scoped to the key of the current call.
 * Throwing from a handler fails the batch: the host commits none of it.
 */
export class StatefulProcessor {
  /** Reads the config, declares state (keep the handles), the output schema and the time mode. */
  init(ctx) {} // eslint-disable-line no-unused-vars

  /** Handles all of one key's new rows of a batch, appending result rows to `output`. */
  handleInputRows(key, rows, timerValues, output) { // eslint-disable-line no-unused-vars
    throw new EddyError(`the processor ${this.constructor.name} does not implement handleInputRows`);
  }

  /** Handles one expired timer of the key; the default fails. */
  handleExpiredTimer(key, timerValues, expiredTimer, output) { // eslint-disable-line no-unused-vars
    throw new EddyError(
      `timer ${expiredTimer.expiryTime} of key ${key} expired but the processor does not implement handleExpiredTimer`,
    );
  }

  /** Loads one key's initial state before the first batch; the default fails. */
  handleInitialState(key, rows, timerValues) { // eslint-disable-line no-unused-vars
    throw new EddyError(
      `the query has initial state (key ${key}) but the processor does not implement handleInitialState`,
    );
  }

  /** Called once when the operator shuts down. */
  close() {}
}

/** A processor instance together with what its init declared. */
export class Driver {
  constructor(Processor, ctx) {
    if (typeof Processor !== 'function') {
      throw new EddyError('exportProcessor/Harness take the processor class (e.g. exportProcessor(MyProcessor))');
    }
    this.processor = new Processor();
    this.processor.init(ctx);
    this.store = ctx.store;
    this.inputSchema = ctx.inputSchema;
    this.keySchema = ctx.keySchema;
    this.spec = ctx.spec;
  }

  output() {
    return new Output(this.spec.outputSchema);
  }

  /** Runs `call` with state and timers usable. */
  keyed(call) {
    this.store.active = true;
    try {
      return call(this.processor);
    } finally {
      this.store.active = false;
    }
  }

  handleInputRows(key, rows, timerValues, output) {
    return this.keyed((p) => p.handleInputRows(key, rows, timerValues, output));
  }

  handleExpiredTimer(key, timerValues, timer, output) {
    return this.keyed((p) => p.handleExpiredTimer(key, timerValues, timer, output));
  }

  handleInitialState(key, rows, timerValues) {
    return this.keyed((p) => p.handleInitialState(key, rows, timerValues));
  }

  close() {
    this.processor.close();
  }
}

const MAX_ERROR_BYTES = 3 * 1024;

/** The message of anything thrown, with its stack, cut to about 3 KiB. */
export function errorMessage(error) {
  let text;
  if (error instanceof Error) {
    const head = error.name && !['Error', 'EddyError'].includes(error.name) ? `${error.name}: ${error.message}` : error.message;
    let stack = typeof error.stack === 'string' ? error.stack : '';
    // V8 starts the stack with the header "Name: message"; SpiderMonkey has frames only.
    const header = `${error.name}: ${error.message}`;
    if (stack === header) stack = '';
    else if (stack.startsWith(`${header}\n`)) stack = stack.slice(header.length + 1);
    stack = stack.trim();
    text = stack ? `${head}\nstack:\n${stack}` : head;
  } else {
    text = `a non-Error value was thrown: ${typeof error === 'string' ? error : safeString(error)}`;
  }
  if (text.length > MAX_ERROR_BYTES) {
    let cut = MAX_ERROR_BYTES - 20;
    const unit = text.charCodeAt(cut - 1);
    if (unit >= 0xd800 && unit <= 0xdbff) cut -= 1; // do not split a surrogate pair
    text = `${text.slice(0, cut)}\n… (truncated)`;
  }
  return text;
}

function safeString(value) {
  try {
    return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)) ?? String(value);
  } catch {
    return String(value);
  }
}
