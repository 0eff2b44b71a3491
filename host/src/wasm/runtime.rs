//! The WebAssembly runtime: wasmtime engines (with and without inlining), modules compiled once
//! and cached on disk ([`super::module_cache`]), and the contract-version check.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, Inlining, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::bindings::{Processor, ProcessorPre};
use super::host::HostState;
use super::module_cache::{ModuleCache, hex};
use crate::contract::{CONTRACT_PACKAGE, CONTRACT_VERSION};

/// How often the epoch advances; call deadlines are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);
/// The largest linear memory any instance may have; per-operator caps are lower.
const MAX_INSTANCE_MEMORY: usize = 4 << 30;

/// The process-wide WebAssembly engines, their linkers and the compiled-module cache.
#[derive(Clone)]
pub struct WasmRuntime {
    /// For modules compiled as they are.
    plain: Compiler,
    /// For modules compiled with inlining (see [`super::inlining`]), made for the first.
    inlining: Arc<OnceLock<std::result::Result<Compiler, String>>>,
    cache_dir: Option<PathBuf>,
}

/// An engine and the linker of eddy's imports for it.
#[derive(Clone)]
struct Compiler {
    engine: Engine,
    linker: Arc<Linker<HostState>>,
    inlining: bool,
}

impl Compiler {
    /// An engine with the component model, the pooling allocator and epoch deadlines
    /// (and inlining within modules when `inlining`).
    fn new(inlining: bool) -> Result<Self> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(256)
            .total_core_instances(1024)
            .total_memories(512)
            .total_tables(512)
            .max_memory_size(MAX_INSTANCE_MEMORY);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .concurrency_support(false)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        if inlining {
            config.compiler_inlining(Inlining::Yes);
        }
        // `EDDY_WASM_PERF_MAP=1` names the guests' compiled functions for `perf`
        // (in /tmp/perf-PID.map), so a profile shows where a processor spends its time.
        if std::env::var_os("EDDY_WASM_PERF_MAP").is_some_and(|value| value == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine =
            Engine::new(&config).map_err(anyhow::Error::from).context("cannot start the WebAssembly engine")?;
        start_epoch_ticker(&engine);
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(anyhow::Error::from)?;
        super::waits::add_to_linker(&mut linker).map_err(anyhow::Error::from)?;
        Processor::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |state| state)
            .map_err(anyhow::Error::from)?;
        Ok(Compiler { engine, linker: Arc::new(linker), inlining })
    }
}

/// A compiled, version-checked, pre-linked processor module.
#[derive(Clone)]
pub struct Module {
    /// The module's file name, used in every message about it.
    pub name: String,
    /// SHA-256 of the module's bytes, hex.
    pub sha256: String,
    /// Whether the module imports `list-timers` (only then are its timers kept by key
    /// as well: see [`KeyScope::with_timers_by_key`](crate::state::KeyScope::with_timers_by_key)).
    pub lists_timers: bool,
    pub(super) engine: Engine,
    pub(super) pre: ProcessorPre<HostState>,
}

impl WasmRuntime {
    /// The engines, caching compiled modules under `cache_dir` (no caching when `None`).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self> {
        Ok(Self { plain: Compiler::new(false)?, inlining: Arc::default(), cache_dir })
    }

    /// The compiler of a module with `code_bytes` of code: with inlining when it has little.
    fn compiler_of(&self, code_bytes: Option<u64>) -> Result<&Compiler> {
        if !super::inlining::inlines(code_bytes) {
            return Ok(&self.plain);
        }
        let made = self.inlining.get_or_init(|| Compiler::new(true).map_err(|error| format!("{error:#}")));
        made.as_ref().map_err(|error| anyhow::anyhow!("{error}"))
    }

    /// The default cache directory: `$EDDY_CACHE_DIR`, else `$XDG_CACHE_HOME/eddy/modules`,
    /// else `~/.cache/eddy/modules`.
    pub fn default_cache_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("EDDY_CACHE_DIR") {
            return Some(PathBuf::from(dir));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
        Some(base.join("eddy").join("modules"))
    }

    /// Loads, checks, compiles (or takes from the cache) and pre-links the module at `path`.
    pub fn load(&self, path: &Path) -> Result<Module> {
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let bytes = std::fs::read(path).with_context(|| format!("cannot read processor module {}", path.display()))?;
        let sha256 = hex(&Sha256::digest(&bytes));
        super::imports::check_imports(&name, &bytes)?;
        let code_bytes = super::inlining::code_bytes(&bytes);
        let compiler = self.compiler_of(code_bytes)?;
        let component = self.compile_cached(compiler, &name, &bytes, code_bytes, &sha256)?;
        let engine = &compiler.engine;
        check_contract_version(engine, &component, &name)?;
        let instance_pre = compiler
            .linker
            .instantiate_pre(&component)
            .map_err(|error| anyhow::anyhow!("module '{name}' cannot be linked against eddy's imports: {error:#}"))?;
        let pre = ProcessorPre::new(instance_pre).map_err(|error| {
            anyhow::anyhow!("module '{name}' does not export the eddy:processor handler: {error:#}")
        })?;
        let lists_timers = imports_function(engine, &component, "timers", "list-timers");
        Ok(Module { name, sha256, lists_timers, engine: engine.clone(), pre })
    }

    fn compile_cached(
        &self,
        compiler: &Compiler,
        name: &str,
        bytes: &[u8],
        code_bytes: Option<u64>,
        sha256: &str,
    ) -> Result<Component> {
        let engine = &compiler.engine;
        let compile = || {
            Component::new(engine, bytes).map_err(|error| {
                anyhow::anyhow!("module '{name}' is not a valid WebAssembly component: {error:#} (build it with `cargo build --target wasm32-wasip2`)")
            })
        };
        let Some(dir) = &self.cache_dir else { return compile() };
        let cache = match ModuleCache::open(dir, engine) {
            Ok(cache) => cache,
            Err(error) => {
                crate::log::warn(&format!("compiling module '{name}' without the module cache: {error:#}"));
                return compile();
            }
        };
        match cache.read(sha256) {
            // SAFETY: the artifact carries this module's SHA-256 and this engine's
            // digest under a MAC only this cache's key makes, so it is what this cache
            // wrote with `Engine::precompile_component` for this very module; wasmtime
            // still checks its own header and refuses an incompatible artifact.
            Ok(Some(artifact)) => match unsafe { Component::deserialize(engine, &artifact) } {
                Ok(component) => return Ok(component),
                Err(error) => crate::log::warn(&format!(
                    "the cached compiled module {} cannot be loaded ({error}); compiling module '{name}' again",
                    cache.file(sha256).display()
                )),
            },
            Ok(None) => {}
            Err(problem) => crate::log::warn(&format!(
                "refusing the cached compiled module {}: {problem:#}; compiling module '{name}' again",
                cache.file(sha256).display()
            )),
        }
        let started = std::time::Instant::now();
        crate::log::info(&format!(
            "compiling module '{name}' ({:.1} MB, {:.2} MB of code{}) for its first load; the result is cached in {} \
             for later runs",
            bytes.len() as f64 / 1e6,
            code_bytes.unwrap_or(0) as f64 / 1e6,
            if compiler.inlining { ", with inlining" } else { "" },
            dir.display()
        ));
        let artifact = engine.precompile_component(bytes).map_err(|error| {
            anyhow::anyhow!("module '{name}' is not a valid WebAssembly component: {error:#} (build it with `cargo build --target wasm32-wasip2`)")
        })?;
        crate::log::info(&format!("compiled module '{name}' in {:.1} s", started.elapsed().as_secs_f64()));
        if let Err(error) = cache.write(sha256, &artifact) {
            crate::log::warn(&format!("cannot cache the compiled module '{name}': {error:#}"));
        }
        // SAFETY: the bytes were produced by `precompile_component` of this very engine.
        unsafe { Component::deserialize(engine, &artifact) }.map_err(anyhow::Error::from)
    }
}

/// Refuses a component built for another major version of the contract.
fn check_contract_version(engine: &Engine, component: &Component, name: &str) -> Result<()> {
    let prefix = format!("{CONTRACT_PACKAGE}/");
    let exports: Vec<String> =
        component.component_type().exports(engine).map(|(export, _)| export.to_string()).collect();
    let Some(found) = exports.iter().find_map(|export| export.strip_prefix(&prefix)) else {
        let names: Vec<&str> = exports.iter().map(String::as_str).collect();
        bail!(
            "module '{name}' is not an eddy processor: it exports [{}], not {CONTRACT_PACKAGE}/handler@{CONTRACT_VERSION}; \
             build it with the eddy-guest SDK (or bind wit/processor.wit)",
            names.join(", ")
        );
    };
    let version = found.split_once('@').map_or("unversioned", |(_, version)| version);
    if !compatible(version, CONTRACT_VERSION) {
        bail!(
            "module '{name}' was built for {CONTRACT_PACKAGE}@{version}, but this eddy implements {CONTRACT_PACKAGE}@{CONTRACT_VERSION}; \
             rebuild the module against the {CONTRACT_VERSION} contract (eddy-guest {CONTRACT_VERSION}) or run an eddy that implements {version}"
        );
    }
    Ok(())
}

/// Whether `component` imports `function` of the contract's interface `interface`
/// (a component built from Rust imports only the functions it calls).
fn imports_function(engine: &Engine, component: &Component, interface: &str, function: &str) -> bool {
    let prefix = format!("{CONTRACT_PACKAGE}/{interface}@");
    component.component_type().imports(engine).any(|(name, import)| {
        name.starts_with(&prefix)
            && matches!(import.ty, ComponentItem::ComponentInstance(instance)
                if instance.exports(engine).any(|(export, _)| export == function))
    })
}

/// Semver compatibility: same major, or for 0.x the same minor.
fn compatible(module: &str, host: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split(['.', '-', '+']);
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    match (parse(module), parse(host)) {
        (Some((0, module_minor)), Some((0, host_minor))) => module_minor == host_minor,
        (Some((module_major, _)), Some((host_major, _))) => module_major == host_major,
        _ => false,
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until the engine is dropped.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("eddy-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .map(drop)
        .unwrap_or_else(|error| crate::log::warn(&format!("cannot start the epoch ticker: {error}")));
}

#[cfg(test)]
mod tests {
    use super::compatible;

    #[test]
    fn versions_follow_semver() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.7", "0.1.0"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(!compatible("1.0.0", "0.1.0"));
        assert!(compatible("1.4.0", "1.0.0"));
        assert!(!compatible("unversioned", "0.1.0"));
        assert!(!compatible("0.1.0", "0.2.0"), "a module of the first contract is refused by the second");
        assert!(!compatible("0.2.0", "0.3.0"), "a module of the second contract is refused by the third");
        assert!(compatible("0.3.0", "0.3.1"), "a module of 0.3.0 runs on this eddy, which adds a function");
    }
}
