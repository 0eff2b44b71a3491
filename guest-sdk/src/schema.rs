//! Column types, fields and schemas.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The logical type of a column or of a key part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// true or false (`BOOLEAN`).
    Boolean,
    /// A 64-bit signed integer (`BIGINT`).
    Int64,
    /// A 64-bit IEEE-754 float (`DOUBLE`).
    Float64,
    /// UTF-8 text (`STRING`).
    Utf8,
    /// Raw bytes (`BINARY`).
    Binary,
    /// Microseconds since the Unix epoch, UTC (`TIMESTAMP`).
    Timestamp,
}

impl DataType {
    /// The SQL name of the type, as [`Schema::parse`] accepts it.
    pub fn sql_name(self) -> &'static str {
        match self {
            DataType::Boolean => "BOOLEAN",
            DataType::Int64 => "BIGINT",
            DataType::Float64 => "DOUBLE",
            DataType::Utf8 => "STRING",
            DataType::Binary => "BINARY",
            DataType::Timestamp => "TIMESTAMP",
        }
    }

    fn from_sql_name(name: &str) -> Option<DataType> {
        Some(match name.to_ascii_uppercase().as_str() {
            "BOOLEAN" | "BOOL" => DataType::Boolean,
            "BIGINT" | "LONG" | "INT64" => DataType::Int64,
            "DOUBLE" | "FLOAT64" => DataType::Float64,
            "STRING" | "UTF8" => DataType::Utf8,
            "BINARY" | "BYTES" => DataType::Binary,
            "TIMESTAMP" => DataType::Timestamp,
            _ => return None,
        })
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sql_name())
    }
}

/// One named, typed column of a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The column's name.
    pub name: String,
    /// The column's type.
    pub data_type: DataType,
    /// Whether the column may hold nulls.
    pub nullable: bool,
}

impl Field {
    /// A nullable field.
    pub fn new(name: impl Into<String>, data_type: DataType) -> Self {
        Field { name: name.into(), data_type, nullable: true }
    }

    /// This field, made non-nullable.
    pub fn not_null(mut self) -> Self {
        self.nullable = false;
        self
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.data_type)?;
        if !self.nullable {
            f.write_str(" NOT NULL")?;
        }
        Ok(())
    }
}

/// An ordered list of fields with unique names.
///
/// ```
/// use eddy_guest::{DataType, Schema};
///
/// let schema = Schema::parse("user STRING NOT NULL, amount BIGINT")?;
/// assert_eq!(schema.index_of("amount"), Some(1));
/// assert_eq!(schema.fields()[0].data_type, DataType::Utf8);
/// assert_eq!(schema.to_string(), "user STRING NOT NULL, amount BIGINT");
/// # Ok::<(), eddy_guest::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schema {
    fields: Vec<Field>,
}

impl Schema {
    /// A schema of these fields; fails on an empty or repeated name.
    pub fn new(fields: Vec<Field>) -> Result<Self> {
        for (i, field) in fields.iter().enumerate() {
            if field.name.is_empty() {
                return Err(Error::msg(format!("schema field {i} has an empty name")));
            }
            if fields[..i].iter().any(|other| other.name == field.name) {
                return Err(Error::msg(format!(
                    "schema has two fields named `{}`; give each column a unique name",
                    field.name
                )));
            }
        }
        Ok(Schema { fields })
    }

    /// Parses a SQL-like column list: `name TYPE [NOT NULL], ...`.
    ///
    /// Types: `STRING`, `BIGINT`, `DOUBLE`, `BOOLEAN`, `BINARY`, `TIMESTAMP`
    /// (case-insensitive). Columns are nullable unless marked `NOT NULL`. An empty
    /// string is the empty schema.
    pub fn parse(ddl: &str) -> Result<Self> {
        let mut fields = Vec::new();
        for part in ddl.split(',') {
            let words: Vec<&str> = part.split_whitespace().collect();
            let (name, type_name, nullable) = match words.as_slice() {
                [] if fields.is_empty() && ddl.trim().is_empty() => break,
                [name, type_name] => (*name, *type_name, true),
                [name, type_name, not, null]
                    if not.eq_ignore_ascii_case("not") && null.eq_ignore_ascii_case("null") =>
                {
                    (*name, *type_name, false)
                }
                _ => {
                    return Err(Error::msg(format!(
                        "cannot parse column `{}` in schema `{ddl}`: expected `name TYPE` or \
                         `name TYPE NOT NULL`",
                        part.trim()
                    )));
                }
            };
            let data_type = DataType::from_sql_name(type_name).ok_or_else(|| {
                Error::msg(format!(
                    "unknown type `{type_name}` for column `{name}` in schema `{ddl}`; use one \
                     of STRING, BIGINT, DOUBLE, BOOLEAN, BINARY, TIMESTAMP"
                ))
            })?;
            fields.push(Field { name: name.to_string(), data_type, nullable });
        }
        Schema::new(fields)
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether the schema has no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The position of the field named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|field| field.name == name)
    }
}

impl FromStr for Schema {
    type Err = Error;

    fn from_str(ddl: &str) -> Result<Self> {
        Schema::parse(ddl)
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{field}")?;
        }
        Ok(())
    }
}

/// Something that names a column: its position (`usize`) or its name (`&str`).
pub trait ColumnRef: fmt::Display {
    /// The column's position in `schema`, or an error naming the column and schema.
    fn resolve(&self, schema: &Schema) -> Result<usize>;
}

impl ColumnRef for usize {
    fn resolve(&self, schema: &Schema) -> Result<usize> {
        if *self < schema.len() {
            Ok(*self)
        } else {
            Err(Error::msg(format!(
                "column index {self} is out of range for schema ({schema}) of {} columns",
                schema.len()
            )))
        }
    }
}

impl ColumnRef for &str {
    fn resolve(&self, schema: &Schema) -> Result<usize> {
        schema.index_of(self).ok_or_else(|| Error::msg(format!("no column `{self}` in schema ({schema})")))
    }
}

impl ColumnRef for &String {
    fn resolve(&self, schema: &Schema) -> Result<usize> {
        self.as_str().resolve(schema)
    }
}
