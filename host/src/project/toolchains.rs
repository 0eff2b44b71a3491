//! Where the guest toolchains are: the pinned installs of
//! `scripts/install-guest-toolchains.sh` (`$EDDY_TOOLS_DIR`, default
//! `~/.cache/eddy-tools`), overridable one by one, else the `PATH`.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::eddy_home;

/// The componentize-py version eddy's Python SDK is built and tested with.
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// The componentize-js version eddy's JavaScript SDK is built and tested with.
pub const COMPONENTIZE_JS: &str = "0.23.0";

/// The tools `eddy build` runs.
#[derive(Clone, Debug)]
pub struct Toolchains {
    /// The persistent tools directory.
    pub tools_dir: PathBuf,
    /// eddy's sources (the SDKs).
    pub home: PathBuf,
}

impl Toolchains {
    /// The toolchains of this machine, from the environment.
    pub fn from_env() -> Toolchains {
        let tools_dir = std::env::var_os("EDDY_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"));
            cache.join("eddy-tools")
        });
        Toolchains { tools_dir, home: eddy_home() }
    }

    /// The Rust SDK crate.
    pub fn rust_sdk(&self) -> PathBuf {
        self.home.join("guest-sdk")
    }

    /// The Python SDK package's directory (what goes on componentize-py's path).
    pub fn python_sdk(&self) -> PathBuf {
        self.home.join("sdks").join("python")
    }

    /// The JavaScript SDK package.
    pub fn js_sdk(&self) -> PathBuf {
        self.home.join("sdks").join("js")
    }

    /// The Python toolchain's venv: `$EDDY_PY_TOOLCHAIN`, else the pinned install.
    pub fn python_venv(&self) -> PathBuf {
        std::env::var_os("EDDY_PY_TOOLCHAIN")
            .map_or_else(|| self.tools_dir.join(format!("componentize-py-{COMPONENTIZE_PY}")), PathBuf::from)
    }

    /// `componentize-py`: `$EDDY_PY_TOOLCHAIN/bin`, the pinned install, or the `PATH`.
    pub fn componentize_py(&self) -> Result<PathBuf> {
        let pinned = self.python_venv().join("bin").join("componentize-py");
        if pinned.is_file() {
            return Ok(pinned);
        }
        if let Some(found) = on_path("componentize-py") {
            return Ok(found);
        }
        bail!(
            "componentize-py is not installed (looked in {} and on the PATH): run `scripts/install-guest-toolchains.sh` \
             from eddy's sources, or `pip install componentize-py=={COMPONENTIZE_PY}`",
            pinned.display()
        )
    }

    /// The directory holding `node_modules` with componentize-js and esbuild.
    pub fn js_toolchain(&self) -> PathBuf {
        std::env::var_os("EDDY_JS_TOOLCHAIN")
            .map_or_else(|| self.tools_dir.join(format!("componentize-js-{COMPONENTIZE_JS}")), PathBuf::from)
    }

    /// `node`, from the `PATH`.
    pub fn node(&self) -> Result<PathBuf> {
        on_path("node").ok_or_else(|| {
            anyhow::anyhow!(
                "node is not installed: install Node.js 20 or later (`apt-get install nodejs npm`), \
                 or run `scripts/install-guest-toolchains.sh` from eddy's sources"
            )
        })
    }
}

/// The first `program` on the `PATH`.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}
