//! The WebAssembly runtime that runs processor modules: the engine and module
//! cache, the sandbox, the host side of the contract, and instances.

mod bindings;
mod host;
mod instance;
pub mod rows;
mod runtime;
mod sandbox;

pub use bindings::eddy::processor::logging::Level as LogLevel;
pub use bindings::{
    CONTRACT_PACKAGE, CONTRACT_VERSION, Column, ColumnValues, DataType, ExpiredTimer, Field, InitContext, OutputMode,
    ProcessorSpec, RowBatch, Scalar, StateDeclaration, StateKind, TimeMode, TimerValues, VarLen,
};
pub use instance::{GuestError, GuestProblem, InstanceLimits, ProcessorInstance};
pub use runtime::{Module, WasmRuntime};
