//! Host-side bindings of the `eddy:processor` world, generated from `wit/`; the
//! `types` interface is the one generated in [`crate::contract`].

wasmtime::component::bindgen!({
    path: "../wit",
    world: "processor",
    imports: { default: trappable },
    with: {
        "eddy:processor/types": crate::contract::eddy::processor::types,
        "eddy:processor/state.value-state": super::host::ValueStateHandle,
        "eddy:processor/state.list-state": super::host::ListStateHandle,
        "eddy:processor/state.map-state": super::host::MapStateHandle,
    },
});
