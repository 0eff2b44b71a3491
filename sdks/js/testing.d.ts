// Type declarations of eddy-guest/testing (see src/testing.js).
import type { Cell, ExpiredTimer, OutputMode, OutputValue, ProcessorSpec, QueryInfo, Rows, StatefulProcessor, Ttl } from './index.js';

export type TestRow = OutputValue[] | Record<string, OutputValue>;

export function batch(ddl: string, rows: TestRow[]): Rows;

export interface HarnessOptions {
  inputSchema: string;
  keySchema: string;
  outputMode?: OutputMode;
  config?: string | object;
  processingTime?: bigint | number;
  watermark?: bigint | number;
  initialStateSchema?: string;
  eventTimeColumn?: string;
  queryInfo?: QueryInfo;
}

export class Harness<P extends StatefulProcessor = StatefulProcessor> {
  constructor(processor: new () => P, options: HarnessOptions);
  readonly processor: P;
  readonly spec: ProcessorSpec;
  readonly processingTime: bigint;
  readonly watermark: bigint | undefined;
  /** The batch id handlers see; set it as the host's next batch would. */
  batchId: bigint;
  readonly logs: { level: string; message: string }[];
  feed(key: Cell | Cell[], rows: TestRow[]): Rows;
  initialState(key: Cell | Cell[], rows: TestRow[]): void;
  advanceProcessingTime(by: bigint | number | Exclude<Ttl, bigint>): Rows;
  setProcessingTime(micros: bigint | number): Rows;
  setWatermark(micros: bigint | number): Rows;
  /**
   * Runs one micro-batch as the host does: each key's rows (late rows dropped), then the
   * timers due at the batch's clock; a failing call fails the batch and keeps nothing.
   */
  runBatch(batch: { processingTime: bigint | number; watermark?: bigint | number; keys?: [Cell | Cell[], TestRow[]][] }): Rows;
  valueState<T = any>(name: string, key: Cell | Cell[]): T | undefined;
  listState<T = any>(name: string, key: Cell | Cell[]): T[];
  mapState<K = any, V = any>(name: string, key: Cell | Cell[]): [K, V][];
  rawValueState(name: string, key: Cell | Cell[]): Uint8Array | undefined;
  timers(key: Cell | Cell[]): bigint[];
  close(): void;
}
export type { ExpiredTimer };
