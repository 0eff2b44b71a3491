//! Schemas written the way Spark users write them: `"user STRING, amount BIGINT"`.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};

use crate::contract::DataType;
use crate::contract::rows::arrow_type;

/// The type names a schema may use, for messages.
pub const TYPE_NAMES: &str = "STRING, BIGINT, DOUBLE, BOOLEAN, BINARY, TIMESTAMP";

/// Parses a DDL-style schema: comma-separated `name TYPE [NOT NULL]` columns.
pub fn parse_schema(ddl: &str) -> Result<SchemaRef, String> {
    let mut fields: Vec<Field> = Vec::new();
    for (index, column) in ddl.split(',').enumerate() {
        let words: Vec<&str> = column.split_whitespace().collect();
        let position = format!("column {} ('{}')", index + 1, column.trim());
        let (name, type_name, nullable) = match words.as_slice() {
            [name, type_name] => (*name, *type_name, true),
            [name, type_name, not, null] if not.eq_ignore_ascii_case("not") && null.eq_ignore_ascii_case("null") => {
                (*name, *type_name, false)
            }
            _ => return Err(format!("{position}: expected `name TYPE` or `name TYPE NOT NULL`")),
        };
        let name = name.trim_matches('`');
        let data_type = parse_type(type_name)
            .ok_or_else(|| format!("{position}: unknown type {type_name}; use one of {TYPE_NAMES}"))?;
        if fields.iter().any(|field| field.name() == name) {
            return Err(format!("{position}: column '{name}' appears twice"));
        }
        fields.push(Field::new(name, arrow_type(data_type), nullable));
    }
    Ok(Arc::new(Schema::new(fields)))
}

fn parse_type(name: &str) -> Option<DataType> {
    Some(match name.to_ascii_uppercase().as_str() {
        "STRING" | "VARCHAR" | "TEXT" => DataType::Utf8,
        "BIGINT" | "LONG" | "INT" | "INTEGER" | "SMALLINT" | "TINYINT" => DataType::Int64,
        "DOUBLE" | "FLOAT" | "REAL" => DataType::Float64,
        "BOOLEAN" | "BOOL" => DataType::Boolean,
        "BINARY" | "BYTES" => DataType::Binary,
        "TIMESTAMP" => DataType::Timestamp,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spark_style_schemas() {
        let schema = parse_schema("user STRING, amount BIGINT NOT NULL, ts timestamp").expect("valid");
        assert_eq!(schema.fields().len(), 3);
        assert!(!schema.field(1).is_nullable());
        assert_eq!(schema.field(2).data_type(), &arrow_type(DataType::Timestamp));
    }

    #[test]
    fn explains_bad_schemas() {
        assert_eq!(
            parse_schema("user STRING, amount DECIMAL").unwrap_err(),
            format!("column 2 ('amount DECIMAL'): unknown type DECIMAL; use one of {TYPE_NAMES}")
        );
        assert_eq!(
            parse_schema("user STRING, user BIGINT").unwrap_err(),
            "column 2 ('user BIGINT'): column 'user' appears twice"
        );
        assert!(parse_schema("user").unwrap_err().contains("expected `name TYPE`"));
    }
}
