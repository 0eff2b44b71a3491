// Type declarations of eddy-guest (see src/index.js).

/** WIT data type names. */
export type DataTypeName = 'boolean' | 'int64' | 'float64' | 'utf8' | 'binary' | 'timestamp';
/** A cell value: BIGINT/TIMESTAMP bigint, DOUBLE number, STRING string, BINARY Uint8Array, BOOLEAN boolean. */
export type Cell = bigint | number | string | boolean | Uint8Array | null;
export type TimeMode = 'none' | 'processing-time' | 'event-time';
export type OutputMode = 'append' | 'update' | 'complete';
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export class EddyError extends Error {}
export class CborError extends Error {}

export const DataType: Readonly<Record<DataTypeName, string>>;

export class Field {
  constructor(name: string, dataType: DataTypeName, nullable?: boolean);
  readonly name: string;
  readonly dataType: DataTypeName;
  readonly nullable: boolean;
}

export class Schema {
  constructor(fields: Field[]);
  /** Parses `name TYPE [NOT NULL], ...`. */
  static parse(ddl: string | Schema): Schema;
  readonly fields: readonly Field[];
  readonly length: number;
  indexOf(name: string): number;
  resolve(col: string | number): number;
}

/** A state type descriptor. */
export type StateType =
  | 'int64' | 'i64' | 'float64' | 'f64' | 'string' | 'str' | 'bool' | 'boolean' | 'bytes' | 'any'
  | { readonly kind: string }
  | { readonly [field: string]: StateType };

export const t: {
  readonly int64: 'int64';
  readonly float64: 'float64';
  readonly string: 'string';
  readonly bool: 'bool';
  readonly bytes: 'bytes';
  readonly any: 'any';
  optional(of: StateType): StateType;
  list(of: StateType): StateType;
  tuple(...items: StateType[]): StateType;
  map(key: StateType, value: StateType): StateType;
  struct(fields: { [field: string]: StateType }): StateType;
};

export class Codec<T = unknown> {
  constructor(type?: StateType);
  encode(value: T, what?: string): Uint8Array;
  decode(bytes: Uint8Array, what?: string): T;
}

export function encodeAny(value: unknown): Uint8Array;
export function decodeAny(bytes: Uint8Array): unknown;

/** A TTL: `{hours: 24}`, `{seconds: 30}`, ... or a bigint of microseconds. */
export type Ttl = bigint | { micros: number } | { millis: number } | { seconds: number } | { minutes: number } | { hours: number } | { days: number };

export class ValueState<T = unknown> {
  readonly name: string;
  get(): T | undefined;
  exists(): boolean;
  update(value: T): void;
  clear(): void;
}

export class ListState<T = unknown> {
  readonly name: string;
  get(): T[];
  exists(): boolean;
  appendValue(value: T): void;
  appendList(values: Iterable<T>): void;
  put(values: Iterable<T>): void;
  clear(): void;
}

export class MapState<K = unknown, V = unknown> {
  readonly name: string;
  get(key: K): V | undefined;
  contains(key: K): boolean;
  update(key: K, value: V): void;
  remove(key: K): void;
  exists(): boolean;
  keys(): K[];
  values(): V[];
  entries(): [K, V][];
  clear(): void;
}

export class Timers {
  register(expiryTime: bigint | number): void;
  delete(expiryTime: bigint | number): void;
  list(): bigint[];
}

export interface TimerValues {
  /** The micro-batch's id (a replayed batch has its first run's id). */
  readonly batchId: bigint;
  readonly processingTime: bigint;
  readonly watermark: bigint | undefined;
}

export interface ExpiredTimer {
  readonly expiryTime: bigint;
}

export interface StateDeclaration {
  readonly name: string;
  readonly kind: 'value' | 'list' | 'map';
  readonly ttl: bigint | undefined;
}

export interface ProcessorSpec {
  state: StateDeclaration[];
  outputSchema: Schema;
  timeMode: TimeMode;
  acceptsLateRows: boolean;
  deletedState: string[];
  initialStateSchema: Schema | undefined;
}

/** Which query and which run of it the processor is part of (Spark's `QueryInfo`). */
export interface QueryInfo {
  /** The query's id: kept in the checkpoint, the same across restarts. */
  readonly id: string;
  /** This run's id: new each time the query starts. */
  readonly runId: string;
}

export class InitContext {
  readonly queryInfo: QueryInfo;
  readonly inputSchema: Schema;
  readonly keySchema: Schema;
  readonly outputMode: OutputMode;
  readonly eventTimeColumn: string | undefined;
  /** The config JSON text. */
  readonly configJson: string;
  /** The config, parsed. */
  readonly config: any;
  readonly spec: ProcessorSpec;
  valueState<T = unknown>(name: string, options?: { type?: StateType; ttl?: Ttl }): ValueState<T>;
  listState<T = unknown>(name: string, options?: { type?: StateType; ttl?: Ttl }): ListState<T>;
  mapState<K = unknown, V = unknown>(name: string, options?: { keyType?: StateType; type?: StateType; ttl?: Ttl }): MapState<K, V>;
  timers(): Timers;
  setOutputSchema(schema: string | Schema): void;
  setTimeMode(mode: TimeMode): void;
  setAcceptsLateRows(accepts: boolean): void;
  /** Deletes the data of a state variable an earlier version declared (Spark's `deleteIfExists`). */
  deleteIfExists(name: string): void;
  setInitialStateSchema(schema: string | Schema): void;
}

export class Key {
  readonly parts: readonly { readonly dataType: DataTypeName | null; readonly value: Cell }[];
  readonly values: Cell[];
  readonly length: number;
  str(index?: number): string;
  i64(index?: number): bigint;
  f64(index?: number): number;
  bool(index?: number): boolean;
  bytes(index?: number): Uint8Array;
  timestamp(index?: number): bigint;
}

export class Column {
  readonly field: Field;
  readonly length: number;
  isNull(row: number): boolean;
  hasNulls(): boolean;
  get(row: number): Cell | undefined;
  i64s(): BigInt64Array;
  timestamps(): BigInt64Array;
  f64s(): Float64Array;
  bools(): boolean[];
  strs(): (string | null)[];
  binaries(): (Uint8Array | null)[];
}

export type ColumnRef = string | number;

export class Row {
  readonly index: number;
  value(col: ColumnRef): Cell;
  isNull(col: ColumnRef): boolean;
  i64(col: ColumnRef): bigint;
  i64Opt(col: ColumnRef): bigint | null;
  f64(col: ColumnRef): number;
  f64Opt(col: ColumnRef): number | null;
  bool(col: ColumnRef): boolean;
  boolOpt(col: ColumnRef): boolean | null;
  str(col: ColumnRef): string;
  strOpt(col: ColumnRef): string | null;
  bytes(col: ColumnRef): Uint8Array;
  bytesOpt(col: ColumnRef): Uint8Array | null;
  timestamp(col: ColumnRef): bigint;
  timestampOpt(col: ColumnRef): bigint | null;
  toArray(): Cell[];
  toObject(): Record<string, Cell>;
}

export class Rows implements Iterable<Row> {
  readonly schema: Schema;
  readonly length: number;
  column(col: ColumnRef): Column;
  i64s(col: ColumnRef): BigInt64Array;
  f64s(col: ColumnRef): Float64Array;
  timestamps(col: ColumnRef): BigInt64Array;
  strs(col: ColumnRef): (string | null)[];
  row(index: number): Row | undefined;
  [Symbol.iterator](): Iterator<Row>;
  toArrays(): Cell[][];
  toObjects(): Record<string, Cell>[];
}

/** An output value: a Cell, or for BIGINT/TIMESTAMP a safe integer, for TIMESTAMP a Date. */
export type OutputValue = Cell | Date | undefined;

export class Output {
  readonly schema: Schema;
  readonly length: number;
  appendRow(values: OutputValue[]): void;
  append(row: Record<string, OutputValue>): void;
  row(): { set(col: ColumnRef, value: OutputValue): ReturnType<Output['row']>; append(): void };
}

export abstract class StatefulProcessor {
  init(ctx: InitContext): void;
  handleInputRows(key: Key, rows: Rows, timerValues: TimerValues, output: Output): void;
  handleExpiredTimer(key: Key, timerValues: TimerValues, expiredTimer: ExpiredTimer, output: Output): void;
  handleInitialState(key: Key, rows: Rows, timerValues: TimerValues): void;
  close(): void;
}

/** The WIT `handler` export object. */
export interface Handler {
  init(context: unknown): unknown;
  handleInputRows(key: unknown, rows: unknown, timerValues: unknown): unknown;
  handleExpiredTimer(key: unknown, timerValues: unknown, timer: unknown): unknown;
  handleInitialState(key: unknown, rows: unknown, timerValues: unknown): void;
  close(): void;
}

/** Makes a processor class the component's processor: `export const handler = exportProcessor(P)`. */
export function exportProcessor(processor: new () => StatefulProcessor): Handler;
/** Installs the WIT imports (done by the module eddy-guest-build generates). */
export function installHost(imports: { state: unknown; timers: unknown; logging: unknown }): void;

export const LEVELS: readonly LogLevel[];
export function log(level: LogLevel, message: string): void;
export const logger: Readonly<Record<LogLevel, (message: string) => void>>;
export function errorMessage(error: unknown): string;
