//! Operators: what runs on each key's rows. Today: a user's WebAssembly processor.

mod grouping;
pub mod key;
mod shards;
mod wasm_operator;

pub use grouping::{Grouped, KeyRows, group_by_key};
pub use shards::{ShardedOperator, ShardedOutput, key_group_ranges};
pub use wasm_operator::{BatchTime, OperatorOptions, OperatorOutput, WasmOperator};

use crate::state::{StateKind, VariableDecl};
use crate::wasm;

/// The host's view of a state variable a processor declared.
pub fn variable_decl(decl: &wasm::StateDeclaration) -> VariableDecl {
    VariableDecl {
        name: decl.name.clone(),
        kind: match decl.kind {
            wasm::StateKind::Value => StateKind::Value,
            wasm::StateKind::List => StateKind::List,
            wasm::StateKind::Map => StateKind::Map,
        },
        ttl_us: decl.ttl,
    }
}
