//! The contract at the ground: the Rust types of `wit/processor.wit`'s `types`
//! interface (generated once here and reused by the runtime's bindings) and the
//! mapping between Arrow record batches and the contract's columnar `row-batch`.
//!
//! Every room that speaks of scalars, column types, time modes or output modes takes
//! them from here, so that none of them depends on the WebAssembly runtime (`wasm/`).

pub mod rows;

/// The bindings generated from `wit/` for a world that imports only `types`.
#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        inline: "package eddy:host-contract; world types-only { import eddy:processor/types@0.3.1; }",
        world: "eddy:host-contract/types-only",
        additional_derives: [PartialEq],
    });
}

pub use generated::eddy;
pub use generated::eddy::processor::types::{
    Column, ColumnValues, DataType, DueTimer, Field, InitContext, KeyRows, Output, OutputMode, ProcessorSpec,
    QueryInfo, RowBatch, Scalar, StateDeclaration, StateKind, TimeMode, TimerValues, VarLen,
};

/// The contract version this host implements.
pub const CONTRACT_VERSION: &str = "0.3.1";
/// The contract's package name.
pub const CONTRACT_PACKAGE: &str = "eddy:processor";
