//! The WebAssembly runtime that runs processor modules: the engine and module
//! cache, the sandbox, the host side of the contract, and instances.
//!
//! The contract's types live in [`crate::contract`]; here is only the runtime:
//! - `runtime.rs`: the engines, loading modules, the contract-version check;
//! - `inlining.rs`: which modules are compiled with inlining (those with little code);
//! - `module_cache.rs`: compiled modules on disk, each bound to its module and engine;
//! - `instance.rs`: one instance and its calls, each under a deadline and a memory cap;
//! - `guest_error.rs`: what a failed call or instantiation means, said for the user;
//! - `sandbox.rs`: what WASI gives a guest (batch clock, seeded random, captured output);
//! - `waits.rs`: sleeps and `wasi:io/poll` answered against the batch clock, never blocking;
//! - `bindings.rs`: the `processor` world's bindings;
//! - `host/`: one file per imported WIT interface (`scope`, `state`, `timers`, `logging`).

mod bindings;
mod guest_error;
mod host;
mod imports;
mod inlining;
mod instance;
mod module_cache;
mod runtime;
mod sandbox;
mod waits;

pub use guest_error::{GuestError, GuestProblem};
pub use host::{CallKey, CallTimer};
pub use imports::{Interfaces, check_imports, component_interfaces};
pub use instance::ProcessorInstance;
pub use runtime::{Module, WasmRuntime};
pub use sandbox::RandomScope;
