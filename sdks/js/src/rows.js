// Read access to columnar row batches (by column as typed arrays, or by row as
// views), and the grouping key of a call.
//
// Cell values: BIGINT and TIMESTAMP -> bigint, DOUBLE -> number, STRING -> string,
// BINARY -> Uint8Array, BOOLEAN -> boolean, null -> null.

import { EddyError, Field, Schema, sqlName } from './schema.js';
import { decodeUtf8 } from './utf8.js';


function isNullBit(validity, row) {
  return validity !== undefined && validity !== null && (validity[row >> 3] & (1 << (row & 7))) === 0;
}

function columnLength(values, dataType) {
  return dataType === 'utf8' || dataType === 'binary' ? values.offsets.length - 1 : values.length;
}

/** One column of a batch. */
export class Column {
  constructor(field, data, numRows) {
    this.field = field;
    this.data = data;
    this.length = numRows;
    this.cache = undefined;
  }

  /** Whether row `row` is null (null rows hold a placeholder in the typed arrays). */
  isNull(row) {
    return row < this.length && isNullBit(this.data.validity, row);
  }

  /** Whether any row is null. */
  hasNulls() {
    for (let row = 0; row < this.length; row++) if (isNullBit(this.data.validity, row)) return true;
    return false;
  }

  /** Row `row`'s value (null when null), or undefined past the end. */
  get(row) {
    if (!(row >= 0 && row < this.length)) return undefined;
    if (isNullBit(this.data.validity, row)) return null;
    const values = this.data.values;
    switch (this.field.dataType) {
      case 'utf8':
        return this.text(row);
      case 'binary':
        return values.data.slice(values.offsets[row], values.offsets[row + 1]);
      default:
        return values[row];
    }
  }

  text(row) {
    const { data, offsets } = this.data.values;
    try {
      return decodeUtf8(data.subarray(offsets[row], offsets[row + 1]));
    } catch {
      throw new EddyError(`column \`${this.field.name}\` row ${row} is not valid UTF-8`);
    }
  }

  expect(dataType, accessor) {
    if (this.field.dataType !== dataType) {
      throw new EddyError(
        `column \`${this.field.name}\` is ${sqlName(this.field.dataType)}, so \`${accessor}\` (for ${sqlName(dataType)}) cannot read it`,
      );
    }
    return this.data.values;
  }

  /** The values of a BIGINT column (a BigInt64Array; nulls hold 0n). */
  i64s() {
    return this.expect('int64', 'i64s');
  }

  /** The values of a TIMESTAMP column, microseconds since the epoch (BigInt64Array). */
  timestamps() {
    return this.expect('timestamp', 'timestamps');
  }

  /** The values of a DOUBLE column (Float64Array; nulls hold 0). */
  f64s() {
    return this.expect('float64', 'f64s');
  }

  /** The values of a BOOLEAN column (nulls hold false). */
  bools() {
    return this.expect('boolean', 'bools');
  }

  /** The values of a STRING column as strings (null for nulls). */
  strs() {
    this.expect('utf8', 'strs');
    this.cache ??= Array.from({ length: this.length }, (_, row) => this.get(row));
    return this.cache;
  }

  /** The values of a BINARY column as Uint8Arrays (null for nulls). */
  binaries() {
    this.expect('binary', 'binaries');
    return Array.from({ length: this.length }, (_, row) => this.get(row));
  }
}

const GETTERS = [
  ['i64', 'int64'],
  ['f64', 'float64'],
  ['bool', 'boolean'],
  ['str', 'utf8'],
  ['bytes', 'binary'],
  ['timestamp', 'timestamp'],
];

/** A view of one row of a batch. Typed getters throw on null; their `Opt` forms return null. */
export class Row {
  constructor(rows, index) {
    this.rows = rows;
    this.index = index;
  }

  /** The value in column `col` (a name or position), null when null. */
  value(col) {
    return this.rows.column(col).get(this.index);
  }

  /** Whether column `col` is null in this row. */
  isNull(col) {
    return this.rows.column(col).isNull(this.index);
  }

  /** Every value of the row, in schema order. */
  toArray() {
    return this.rows.schema.fields.map((_, i) => this.value(i));
  }

  /** The row as an object keyed by column name. */
  toObject() {
    return Object.fromEntries(this.rows.schema.fields.map((f, i) => [f.name, this.value(i)]));
  }
}

for (const [name, dataType] of GETTERS) {
  Row.prototype[`${name}Opt`] = function getOpt(col) {
    const column = this.rows.column(col);
    if (column.field.dataType !== dataType) {
      throw new EddyError(
        `column \`${column.field.name}\` is ${sqlName(column.field.dataType)}, so \`row.${name}(..)\` (for ${sqlName(dataType)}) cannot read it`,
      );
    }
    return column.get(this.index);
  };
  Row.prototype[name] = function get(col) {
    const value = this[`${name}Opt`](col);
    if (value === null) {
      const field = this.rows.column(col).field;
      throw new EddyError(
        `column \`${field.name}\` is null in row ${this.index}; use \`row.${name}Opt(..)\` to read a nullable column`,
      );
    }
    return value;
  };
}

/**
 * A batch of rows in a schema, stored column by column. Read a column with
 * `rows.column(col)` or the shortcuts `i64s`, `f64s`, `timestamps`, `strs`, or go row
 * by row with `for (const row of rows)`.
 */
export class Rows {
  /** `columns[i]` is `{values, validity}` for field i; checked against the schema. */
  constructor(schema, numRows, columns) {
    if (columns.length !== schema.length) {
      throw new EddyError(`batch has ${columns.length} columns but its schema (${schema}) has ${schema.length}`);
    }
    schema.fields.forEach((field, i) => {
      const { values, validity } = columns[i];
      const n = columnLength(values, field.dataType);
      let problem;
      if (n !== numRows) problem = `holds ${n} values for ${numRows} rows`;
      else if (validity && validity.length < Math.ceil(numRows / 8)) problem = `has a validity bitmap too short for ${numRows} rows`;
      if (problem) throw new EddyError(`column \`${field}\` of the batch ${problem}`);
    });
    this.schema = schema;
    this.length = numRows;
    this.columns = columns;
    this.views = new Array(columns.length);
  }

  /** The column named or numbered `col`. */
  column(col) {
    const i = this.schema.resolve(col);
    this.views[i] ??= new Column(this.schema.fields[i], this.columns[i], this.length);
    return this.views[i];
  }

  i64s(col) {
    return this.column(col).i64s();
  }

  f64s(col) {
    return this.column(col).f64s();
  }

  timestamps(col) {
    return this.column(col).timestamps();
  }

  strs(col) {
    return this.column(col).strs();
  }

  /** The row at `index`, or undefined. */
  row(index) {
    return index >= 0 && index < this.length ? new Row(this, index) : undefined;
  }

  *[Symbol.iterator]() {
    for (let i = 0; i < this.length; i++) yield new Row(this, i);
  }

  /** Every row as an array of values (handy in test assertions). */
  toArrays() {
    return [...this].map((row) => row.toArray());
  }

  /** Every row as an object keyed by column name. */
  toObjects() {
    return [...this].map((row) => row.toObject());
  }
}

const WIT_TYPES = ['boolean', 'int64', 'float64', 'utf8', 'binary', 'timestamp'];

function checkOffsets(offsets, rows, dataLength) {
  if (offsets.length !== rows + 1 || offsets[0] !== 0) {
    throw new EddyError(`${offsets.length} offsets for ${rows} rows (want ${rows + 1} starting at 0)`);
  }
  for (let i = 1; i < offsets.length; i++) {
    if (offsets[i] < offsets[i - 1]) throw new EddyError(`offsets decrease at ${i}`);
  }
  if (offsets[rows] > dataLength) throw new EddyError(`offsets run past the ${dataLength} data bytes`);
}

/** A WIT row-batch as Rows in `schema` (or positional `_0, _1, ...` columns without one). */
export function rowsFromWit(batch, schema) {
  const numRows = batch.numRows;
  const columns = batch.columns.map((column, i) => {
    const { tag, val } = column.values;
    try {
      if (!WIT_TYPES.includes(tag)) throw new EddyError(`unknown column type ${tag}`);
      if (tag === 'utf8' || tag === 'binary') checkOffsets(val.offsets, numRows, val.data.length);
    } catch (e) {
      const name = schema?.fields[i]?.name ?? `_${i}`;
      throw new EddyError(`the host sent a malformed column \`${name}\`: ${e.message}`);
    }
    return { tag, values: val, validity: column.validity ?? undefined };
  });
  const actual = schema ?? new Schema(columns.map((c, i) => new Field(`_${i}`, c.tag)));
  columns.forEach((c, i) => {
    const field = actual.fields[i];
    if (field && field.dataType !== c.tag) {
      throw new EddyError(`the host sent a malformed batch: column \`${field}\` holds ${sqlName(c.tag)} values`);
    }
  });
  try {
    return new Rows(actual, numRows, columns);
  } catch (e) {
    throw new EddyError(`the host sent a malformed batch: ${e.message}`);
  }
}

/** The grouping key of a call: one value per key column, in key-schema order. */
export class Key {
  /** `parts` are `{dataType, value}` (dataType null for a null part). */
  constructor(parts) {
    this.parts = Object.freeze(parts.map((p) => Object.freeze({ dataType: p.dataType, value: p.value })));
  }

  /** The key's values, as a plain array. */
  get values() {
    return this.parts.map((p) => p.value);
  }

  get length() {
    return this.parts.length;
  }

  part(index, dataType) {
    const part = this.parts[index];
    if (!part) throw new EddyError(`key ${this} has ${this.parts.length} part(s); there is no part ${index}`);
    if (part.dataType !== dataType) {
      const found = part.dataType ? sqlName(part.dataType) : 'NULL';
      throw new EddyError(`key ${this}: part ${index} is ${found}, not ${sqlName(dataType)}`);
    }
    return part.value;
  }

  str(index = 0) {
    return this.part(index, 'utf8');
  }

  i64(index = 0) {
    return this.part(index, 'int64');
  }

  f64(index = 0) {
    return this.part(index, 'float64');
  }

  bool(index = 0) {
    return this.part(index, 'boolean');
  }

  bytes(index = 0) {
    return this.part(index, 'binary');
  }

  timestamp(index = 0) {
    return this.part(index, 'timestamp');
  }

  /** One part as its value, several as `(a, b)`. */
  toString() {
    const show = (p) =>
      p.value === null ? 'null' : p.value instanceof Uint8Array ? `0x${[...p.value].map((b) => b.toString(16).padStart(2, '0')).join('')}` : String(p.value);
    return this.parts.length === 1 ? show(this.parts[0]) : `(${this.parts.map(show).join(', ')})`;
  }
}

/** A WIT `list<scalar>` as a Key. */
export function keyFromWit(scalars) {
  return new Key(scalars.map((s) => (s.tag === 'null' ? { dataType: null, value: null } : { dataType: s.tag, value: s.val })));
}
