//! Host-side bindings of the `eddy:processor` world, generated from `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "processor",
    imports: { default: trappable },
    additional_derives: [PartialEq],
    with: {
        "eddy:processor/state.value-state": super::host::ValueStateHandle,
        "eddy:processor/state.list-state": super::host::ListStateHandle,
        "eddy:processor/state.map-state": super::host::MapStateHandle,
    },
});

pub use self::eddy::processor::types::{
    Column, ColumnValues, DataType, ExpiredTimer, Field, InitContext, OutputMode, ProcessorSpec, RowBatch, Scalar,
    StateDeclaration, StateKind, TimeMode, TimerValues, VarLen,
};

/// The contract version this host implements.
pub const CONTRACT_VERSION: &str = "0.1.0";
/// The contract's package name.
pub const CONTRACT_PACKAGE: &str = "eddy:processor";
