// Column types, fields and schemas, with the Rust SDK's DDL syntax
// (`user STRING NOT NULL, amount BIGINT`).

/** An error raised by the SDK (bad schema, wrong column, state misuse, ...). */
export class EddyError extends Error {
  constructor(message) {
    super(message);
    this.name = 'EddyError';
  }
}

/** The WIT data types and their SQL names. */
export const DataType = Object.freeze({
  boolean: 'BOOLEAN',
  int64: 'BIGINT',
  float64: 'DOUBLE',
  utf8: 'STRING',
  binary: 'BINARY',
  timestamp: 'TIMESTAMP',
});

const SQL_NAMES = {
  BOOLEAN: 'boolean',
  BOOL: 'boolean',
  BIGINT: 'int64',
  LONG: 'int64',
  INT64: 'int64',
  DOUBLE: 'float64',
  FLOAT64: 'float64',
  STRING: 'utf8',
  UTF8: 'utf8',
  BINARY: 'binary',
  BYTES: 'binary',
  TIMESTAMP: 'timestamp',
};

/** The SQL name (`BIGINT`, ...) of a WIT data type (`int64`, ...). */
export function sqlName(dataType) {
  return DataType[dataType] ?? String(dataType);
}

/** One named, typed column. `dataType` is a WIT name: boolean, int64, float64, utf8, binary, timestamp. */
export class Field {
  constructor(name, dataType, nullable = true) {
    if (!(dataType in DataType)) {
      throw new EddyError(`field \`${name}\` has unknown data type \`${dataType}\``);
    }
    this.name = name;
    this.dataType = dataType;
    this.nullable = nullable;
    Object.freeze(this);
  }

  toString() {
    return `${this.name} ${sqlName(this.dataType)}${this.nullable ? '' : ' NOT NULL'}`;
  }
}

/** An ordered list of fields with unique, non-empty names. */
export class Schema {
  constructor(fields) {
    fields.forEach((field, i) => {
      if (!field.name) throw new EddyError(`schema field ${i} has an empty name`);
      if (fields.slice(0, i).some((other) => other.name === field.name)) {
        throw new EddyError(`schema has two fields named \`${field.name}\`; give each column a unique name`);
      }
    });
    this.fields = Object.freeze([...fields]);
    this.index = new Map(fields.map((field, i) => [field.name, i]));
    Object.freeze(this);
  }

  /**
   * Parses `name TYPE [NOT NULL], ...` (types STRING, BIGINT, DOUBLE, BOOLEAN, BINARY,
   * TIMESTAMP, case-insensitive); the empty string is the empty schema.
   */
  static parse(ddl) {
    if (ddl instanceof Schema) return ddl;
    if (typeof ddl !== 'string') throw new EddyError(`a schema is a DDL string like "user STRING, n BIGINT", got ${typeof ddl}`);
    if (ddl.trim() === '') return new Schema([]);
    const fields = ddl.split(',').map((part) => {
      const words = part.trim().split(/\s+/).filter(Boolean);
      let nullable = true;
      if (words.length === 4 && words[2].toLowerCase() === 'not' && words[3].toLowerCase() === 'null') {
        nullable = false;
      } else if (words.length !== 2) {
        throw new EddyError(
          `cannot parse column \`${part.trim()}\` in schema \`${ddl}\`: expected \`name TYPE\` or \`name TYPE NOT NULL\``,
        );
      }
      const [name, typeName] = words;
      const dataType = SQL_NAMES[typeName.toUpperCase()];
      if (!dataType) {
        throw new EddyError(
          `unknown type \`${typeName}\` for column \`${name}\` in schema \`${ddl}\`; use one of STRING, BIGINT, DOUBLE, BOOLEAN, BINARY, TIMESTAMP`,
        );
      }
      return new Field(name, dataType, nullable);
    });
    return new Schema(fields);
  }

  get length() {
    return this.fields.length;
  }

  /** The position of the field named `name`, or -1. */
  indexOf(name) {
    return this.index.get(name) ?? -1;
  }

  /** The position of column `col` (a name or an index); throws naming the schema. */
  resolve(col) {
    if (typeof col === 'number') {
      if (Number.isInteger(col) && col >= 0 && col < this.fields.length) return col;
      throw new EddyError(`column index ${col} is out of range for schema (${this}) of ${this.fields.length} columns`);
    }
    const i = this.index.get(col);
    if (i === undefined) throw new EddyError(`no column \`${col}\` in schema (${this})`);
    return i;
  }

  toString() {
    return this.fields.map(String).join(', ');
  }
}
