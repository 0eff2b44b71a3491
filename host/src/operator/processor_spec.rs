//! What a processor is handed and what it declares: the contract's fields of the
//! input, key and initial-state schemas, and the checks on the spec `init` returns.

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use arrow::datatypes::{Field as ArrowField, Schema, SchemaRef};

use crate::contract::rows::{arrow_type, contract_type};
use crate::contract::{Field, ProcessorSpec};

/// The contract's fields of `schema`'s columns (those at `only`, in that order, if given).
pub(super) fn contract_fields(schema: &Schema, only: Option<&[usize]>) -> Result<Vec<Field>> {
    let indices: Vec<usize> = match only {
        Some(indices) => indices.to_vec(),
        None => (0..schema.fields().len()).collect(),
    };
    indices
        .into_iter()
        .map(|i| {
            let field = schema.field(i);
            let data_type = contract_type(field.data_type()).with_context(|| {
                format!(
                    "column '{}' has type {}, which eddy cannot pass to a processor",
                    field.name(),
                    field.data_type()
                )
            })?;
            Ok(Field { name: field.name().clone(), data_type, nullable: field.is_nullable() })
        })
        .collect()
}

/// The output schema `spec` declares, once its state variables and output columns are
/// checked (unique names, no TTL of 0, nothing both declared and deleted).
pub(super) fn validate_spec(spec: &ProcessorSpec) -> Result<SchemaRef> {
    let mut names = HashSet::new();
    for decl in &spec.state {
        if decl.name.is_empty() {
            bail!("a state variable with an empty name");
        }
        if !names.insert(decl.name.as_str()) {
            bail!("state variable '{}' twice; names must be unique", decl.name);
        }
        if spec.deleted_state.contains(&decl.name) {
            bail!(
                "state variable '{}' and also deleted it (delete_if_exists); declare it or delete it, not both",
                decl.name
            );
        }
        if decl.ttl == Some(0) {
            bail!("state variable '{}' with a TTL of 0; use no TTL, or a positive duration", decl.name);
        }
    }
    let mut columns = HashSet::new();
    let mut fields = Vec::new();
    for field in &spec.output_schema {
        if !columns.insert(field.name.as_str()) {
            bail!("output column '{}' twice; names must be unique", field.name);
        }
        fields.push(ArrowField::new(&field.name, arrow_type(field.data_type), field.nullable));
    }
    Ok(Arc::new(Schema::new(fields)))
}
