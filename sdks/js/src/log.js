// Messages to the operator's log. In a component the host tags each message with
// the module and the current key; under the test harness messages are captured;
// elsewhere they go to the console.

/** The log levels, least important first. */
export const LEVELS = Object.freeze(['trace', 'debug', 'info', 'warn', 'error']);

let sink;
let capture;

/** Sets where messages go when not captured (the runtime sets the WIT import). */
export function setLogSink(fn) {
  sink = fn;
}

/** Starts capturing messages; returns the array they are pushed to. */
export function captureStart() {
  capture = [];
  return capture;
}

/** Stops capturing and returns what was captured. */
export function captureTake() {
  const records = capture ?? [];
  capture = undefined;
  return records;
}

/** Writes `message` to the operator's log at `level` (trace, debug, info, warn, error). */
export function log(level, message) {
  if (!LEVELS.includes(level)) {
    throw new TypeError(`unknown log level ${JSON.stringify(level)}; use one of ${LEVELS.join(', ')}`);
  }
  const text = String(message);
  if (capture) capture.push({ level, message: text });
  else if (sink) sink(level, text);
  else console.error(`[${level.toUpperCase()}] ${text}`);
}

/** Shortcuts: `logger.info("...")` and so on. */
export const logger = Object.freeze(Object.fromEntries(LEVELS.map((level) => [level, (message) => log(level, message)])));
