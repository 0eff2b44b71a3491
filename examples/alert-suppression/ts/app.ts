// Per-sensor alerts with suppression, reminders and clearing: the TypeScript port of
// ../src/lib.rs (same rules, config, output and state, so checkpoints move between
// the Rust and the TypeScript module).
//
// Input `sensor STRING, reading DOUBLE, ts TIMESTAMP`, keyed by `sensor`; processing
// time mode. Config (every field optional): `threshold` (100.0; a reading above it is
// an alarm reading), `suppress_secs` (300; how long repeats are suppressed after an
// alert), `clear_after` (3; how many readings in a row at or below it clear an alert).
//
// Events, one output row each (`sensor, event, reading, ts, suppressed, raised_today`):
// - RAISE: an alarm reading while no alert is active; starts a processing-time timer
//   `suppress_secs` ahead; further alarm readings are suppressed (counted) until it fires.
// - REMINDER: the timer fired and the last reading is still above the threshold; the
//   timer starts again. If not, the timer just stops and the next alarm reading is
//   reported at once as a REMINDER.
// - CLEAR: the last `clear_after` readings are all at or below the threshold; the alert
//   ends and its timer is deleted.
// `raised_today` counts the sensor's RAISE events on the UTC day of `ts`. Rows with a
// null reading are skipped; a null `ts` is taken as the batch's processing time.
//
// State: `alert` (value), `recent` (list of float64), `raised_per_day` (map from UTC
// date `YYYY-MM-DD` to int64, TTL 24 h from each write).

import {
  exportProcessor,
  EddyError,
  ExpiredTimer,
  InitContext,
  Key,
  ListState,
  MapState,
  Output,
  Rows,
  StatefulProcessor,
  t,
  TimerValues,
  Timers,
  ValueState,
} from 'eddy-guest';

const MICROS_PER_DAY = 86_400_000_000n;

/** The operator's config. */
export interface Config {
  threshold: number;
  suppress_secs: number;
  clear_after: number;
}

const DEFAULTS: Config = { threshold: 100.0, suppress_secs: 300, clear_after: 3 };

/** The config from the operator's JSON, with defaults; refuses unknown fields and bad values. */
export function parseConfig(raw: unknown): Config {
  const given = (raw ?? {}) as Record<string, unknown>;
  const unknown = Object.keys(given).filter((k) => !(k in DEFAULTS));
  if (unknown.length > 0) {
    throw new EddyError(`invalid config: unknown field(s) ${unknown.join(', ')}; expected threshold, suppress_secs, clear_after`);
  }
  const config = { ...DEFAULTS, ...given } as Config;
  const ok =
    typeof config.threshold === 'number' &&
    Number.isFinite(config.threshold) &&
    Number.isSafeInteger(config.suppress_secs) &&
    config.suppress_secs > 0 &&
    Number.isSafeInteger(config.clear_after) &&
    config.clear_after >= 1;
  if (!ok) {
    throw new EddyError(
      `invalid config ${JSON.stringify(config)}: threshold must be a number, suppress_secs > 0 and clear_after >= 1`,
    );
  }
  return config;
}

/** The active alert of a sensor (same fields and order as the Rust `Alert`). */
export interface Alert {
  suppressed: bigint;
  timer: bigint | null;
  last_reading: number;
  last_ts: bigint;
}

export const ALERT = { suppressed: 'int64', timer: t.optional('int64'), last_reading: 'float64', last_ts: 'int64' } as const;

const floorDiv = (a: bigint, b: bigint): bigint => (a % b < 0n ? a / b - 1n : a / b);

/** The UTC date (`YYYY-MM-DD`) of `micros` since the epoch (Howard Hinnant's civil-from-days). */
export function utcDate(micros: bigint): string {
  const z = floorDiv(micros, MICROS_PER_DAY) + 719_468n;
  const era = floorDiv(z, 146_097n);
  const doe = z - era * 146_097n;
  const yoe = (doe - doe / 1460n + doe / 36_524n - doe / 146_096n) / 365n;
  const doy = doe - (365n * yoe + yoe / 4n - yoe / 100n);
  const mp = (5n * doy + 2n) / 153n;
  const day = doy - (153n * mp + 2n) / 5n + 1n;
  const month = mp < 10n ? mp + 3n : mp - 9n;
  const year = yoe + era * 400n + (month <= 2n ? 1n : 0n);
  const pad = (n: bigint, width: number) => (n < 0n ? '-' + (-n).toString().padStart(width, '0') : n.toString().padStart(width, '0'));
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}`;
}

const I64_MAX = (1n << 63n) - 1n;
const saturatingAdd = (a: bigint, b: bigint): bigint => (a + b > I64_MAX ? I64_MAX : a + b);

export class AlertSuppression extends StatefulProcessor {
  private config!: Config;
  private suppressMicros!: bigint;
  private alert!: ValueState<Alert>;
  private recent!: ListState<number>;
  private raisedPerDay!: MapState<string, bigint>;
  private timers!: Timers;

  override init(ctx: InitContext): void {
    this.config = parseConfig(ctx.config);
    ctx.setTimeMode('processing-time');
    ctx.setOutputSchema(
      'sensor STRING NOT NULL, event STRING NOT NULL, reading DOUBLE NOT NULL, ' +
        'ts TIMESTAMP NOT NULL, suppressed BIGINT NOT NULL, raised_today BIGINT NOT NULL',
    );
    this.suppressMicros = BigInt(this.config.suppress_secs) * 1_000_000n;
    this.alert = ctx.valueState<Alert>('alert', { type: ALERT });
    this.recent = ctx.listState<number>('recent', { type: 'float64' });
    this.raisedPerDay = ctx.mapState<string, bigint>('raised_per_day', { keyType: 'string', type: 'int64', ttl: { hours: 24 } });
    this.timers = ctx.timers();
  }

  private emit(output: Output, sensor: string, event: string, reading: number, ts: bigint, suppressed: bigint): void {
    const raisedToday = this.raisedPerDay.get(utcDate(ts)) ?? 0n;
    output.append({ sensor, event, reading, ts, suppressed, raised_today: raisedToday });
  }

  /** Starts a suppression window at the batch's processing time. */
  private arm(now: bigint): bigint {
    const expiry = saturatingAdd(now, this.suppressMicros);
    this.timers.register(expiry);
    return expiry;
  }

  override handleInputRows(key: Key, rows: Rows, timerValues: TimerValues, output: Output): void {
    const sensor = key.str(0);
    const { threshold, clear_after: clearAfter } = this.config;
    let alert: Alert | undefined = this.alert.get();
    const recent = this.recent.get();
    for (const row of rows) {
      const reading = row.f64Opt('reading');
      if (reading === null) continue;
      const ts = row.timestampOpt('ts') ?? timerValues.processingTime;
      recent.push(reading);
      if (recent.length > clearAfter) recent.splice(0, recent.length - clearAfter);
      const above = reading > threshold;
      if (!alert && above) {
        const day = utcDate(ts);
        const raised = (this.raisedPerDay.get(day) ?? 0n) + 1n;
        this.raisedPerDay.update(day, raised);
        const timer = this.arm(timerValues.processingTime);
        alert = { suppressed: 0n, timer, last_reading: reading, last_ts: ts };
        this.emit(output, sensor, 'RAISE', reading, ts, 0n);
      } else if (alert && above) {
        alert.last_reading = reading;
        alert.last_ts = ts;
        if (alert.timer !== null) {
          alert.suppressed += 1n;
        } else {
          const suppressed = alert.suppressed;
          alert.suppressed = 0n;
          alert.timer = this.arm(timerValues.processingTime);
          this.emit(output, sensor, 'REMINDER', reading, ts, suppressed);
        }
      } else if (alert) {
        alert.last_reading = reading;
        alert.last_ts = ts;
        const cleared = recent.length === clearAfter && recent.every((r) => r <= threshold);
        if (cleared) {
          if (alert.timer !== null) this.timers.delete(alert.timer);
          const suppressed = alert.suppressed;
          alert = undefined;
          this.emit(output, sensor, 'CLEAR', reading, ts, suppressed);
        }
      }
    }
    if (alert) this.alert.update(alert);
    else this.alert.clear();
    this.recent.put(recent);
  }

  override handleExpiredTimer(key: Key, timerValues: TimerValues, expiredTimer: ExpiredTimer, output: Output): void {
    const active = this.alert.get();
    if (!active) return;
    if (active.timer !== expiredTimer.expiryTime) return; // a timer of an earlier alert
    if (active.last_reading > this.config.threshold) {
      const suppressed = active.suppressed;
      active.suppressed = 0n;
      this.emit(output, key.str(0), 'REMINDER', active.last_reading, active.last_ts, suppressed);
      active.timer = this.arm(timerValues.processingTime);
    } else {
      active.timer = null;
    }
    this.alert.update(active);
  }
}

export const handler = exportProcessor(AlertSuppression);
