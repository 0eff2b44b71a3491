// Output rows, buffered column by column in the declared output schema and checked
// value by value against it.

import { EddyError, sqlName } from './schema.js';
import { Rows } from './rows.js';
import { encodeUtf8 } from './utf8.js';

const MAX_ROWS = 0xffffffff;

function describe(value) {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'bigint') return `bigint ${value}n`;
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (value instanceof Uint8Array) return `Uint8Array(${value.length})`;
  return `${typeof value} ${String(value)}`;
}

/** The stored form of `value` for a column of `field`, or throws saying why it does not fit. */
function coerce(field, value) {
  if (value === null || value === undefined) {
    if (field.nullable) return null;
  } else {
    switch (field.dataType) {
      case 'int64':
        if (typeof value === 'bigint' && BigInt.asIntN(64, value) === value) return value;
        if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
        break;
      case 'timestamp':
        if (typeof value === 'bigint' && BigInt.asIntN(64, value) === value) return value;
        if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
        if (value instanceof Date && !Number.isNaN(value.getTime())) return BigInt(value.getTime()) * 1000n;
        break;
      case 'float64':
        if (typeof value === 'number') return value;
        break;
      case 'utf8':
        if (typeof value === 'string') return value;
        break;
      case 'binary':
        if (value instanceof Uint8Array) return value;
        break;
      case 'boolean':
        if (typeof value === 'boolean') return value;
        break;
      default:
    }
  }
  const hint = {
    int64: 'a bigint (or a safe integer number)',
    timestamp: 'microseconds as a bigint (or a safe integer, or a Date)',
    float64: 'a number',
    utf8: 'a string',
    binary: 'a Uint8Array',
    boolean: 'a boolean',
  }[field.dataType];
  throw new EddyError(
    `column \`${field}\` cannot hold the ${describe(value)}; it takes ${hint}${field.nullable ? ' or null' : ''} ` +
      `(the output schema is declared in init with setOutputSchema)`,
  );
}

/** Builds a columnar batch row by row; a row that does not fit is not appended at all. */
/** The output size past which a call returns before its next key or timer. */
const CALL_OUTPUT_BYTES = 8 * 1024 * 1024;

export class BatchBuilder {
  constructor(schema) {
    this.schema = schema;
    this.cells = schema.fields.map(() => []);
    this.nulls = schema.fields.map(() => false);
    this.length = 0;
    /** About the bytes the rows hold: a string's or bytes' length, 8 per other value. */
    this.bytes = 0;
  }

  /** Appends one row of values in schema order. */
  append(values) {
    if (!Array.isArray(values)) throw new EddyError(`a row is an array of values in schema order, got ${describe(values)}`);
    if (values.length !== this.schema.length) {
      throw new EddyError(`row has ${values.length} values but the schema (${this.schema}) has ${this.schema.length} columns`);
    }
    if (this.length >= MAX_ROWS) throw new EddyError(`a batch holds at most ${MAX_ROWS} rows`);
    const row = this.schema.fields.map((field, i) => coerce(field, values[i]));
    row.forEach((value, i) => {
      this.cells[i].push(value);
      if (value === null) this.nulls[i] = true;
      this.bytes += typeof value === 'string' || value instanceof Uint8Array ? value.length : 8;
    });
    this.length += 1;
  }

  /** The built column data: `{tag, values, validity}` per column. */
  columns() {
    return this.schema.fields.map((field, i) => {
      const cells = this.cells[i];
      let validity;
      if (this.nulls[i]) {
        validity = new Uint8Array(Math.ceil(cells.length / 8));
        cells.forEach((v, row) => {
          if (v !== null) validity[row >> 3] |= 1 << (row & 7);
        });
      }
      let values;
      switch (field.dataType) {
        case 'int64':
        case 'timestamp':
          values = BigInt64Array.from(cells, (v) => v ?? 0n);
          break;
        case 'float64':
          values = Float64Array.from(cells, (v) => v ?? 0);
          break;
        case 'boolean':
          values = cells.map((v) => v === true);
          break;
        default: {
          const chunks = cells.map((v) => (v === null ? new Uint8Array(0) : typeof v === 'string' ? encodeUtf8(v) : v));
          const offsets = new Uint32Array(cells.length + 1);
          let total = 0;
          chunks.forEach((c, row) => {
            total += c.length;
            if (total > 0xffffffff) {
              throw new EddyError(`column \`${field.name}\` would exceed 4 GiB of data in one batch; emit fewer or smaller values`);
            }
            offsets[row + 1] = total;
          });
          const data = new Uint8Array(total);
          chunks.forEach((c, row) => data.set(c, offsets[row]));
          values = { data, offsets };
        }
      }
      return { tag: field.dataType, values, validity };
    });
  }

  /** The rows as a Rows batch. */
  finish() {
    return new Rows(this.schema, this.length, this.columns());
  }

  /** The rows as a WIT row-batch. */
  toWit() {
    return {
      numRows: this.length,
      columns: this.columns().map((c) => ({ values: { tag: c.tag, val: c.values }, validity: c.validity })),
    };
  }
}

/**
 * The rows a handler outputs, in the output schema declared in init. Append rows
 * positionally (`output.appendRow(["alice", 2n, 12n])`), by name
 * (`output.append({user: "alice", count: 2n})`, unset nullable columns are null), or
 * column by column (`output.row().set("user", "a").set("count", 1n).append()`).
 */
export class Output {
  constructor(schema) {
    this.builder = new BatchBuilder(schema);
    this.start = 0; // where the current handler's rows start (one output serves a whole call)
  }

  /** Whether the call's rows passed 8 MiB: it returns before its next key (the host hands the rest over in another call). */
  callIsFull() {
    return this.builder.bytes >= CALL_OUTPUT_BYTES;
  }

  /** Ends the current handler's rows; returns the end of the rows so far. */
  endHandler() {
    this.start = this.builder.length;
    return this.start;
  }

  get schema() {
    return this.builder.schema;
  }

  /** How many rows this handler appended. */
  get length() {
    return this.builder.length - this.start;
  }

  /** Appends a row of values in output-schema order. */
  appendRow(values) {
    try {
      this.builder.append(values);
    } catch (e) {
      throw new EddyError(`cannot append an output row: ${e.message}`);
    }
  }

  /** Appends a row given as an object keyed by column name. */
  append(object) {
    if (!object || typeof object !== 'object' || Array.isArray(object)) {
      throw new EddyError(`cannot append an output row: append takes an object keyed by column name (use appendRow for an array)`);
    }
    const values = new Array(this.schema.length).fill(undefined);
    const set = new Array(this.schema.length).fill(false);
    for (const [name, value] of Object.entries(object)) {
      let i;
      try {
        i = this.schema.resolve(name);
      } catch (e) {
        throw new EddyError(`cannot append an output row: ${e.message}`);
      }
      values[i] = value;
      set[i] = true;
    }
    const missing = this.schema.fields.find((f, i) => !set[i] && !f.nullable);
    if (missing) throw new EddyError(`cannot append an output row: column \`${missing}\` was not set`);
    this.appendRow(values.map((v) => (v === undefined ? null : v)));
  }

  /** Starts a row set column by column; finish it with `.append()`. */
  row() {
    const values = {};
    const writer = {
      set: (col, value) => {
        const name = typeof col === 'number' ? this.schema.fields[this.schema.resolve(col)].name : col;
        values[name] = value;
        return writer;
      },
      append: () => this.append(values),
    };
    return writer;
  }
}

export { sqlName };
