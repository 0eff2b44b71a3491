//! What a component asks of its host, checked before it is compiled: a component that
//! imports an interface eddy does not provide would fail to link only after its first
//! compile, minutes later for an interpreter-sized module. Reading the import section
//! takes milliseconds.

use anyhow::{Result, bail};
use wasmparser::{Parser, Payload};

/// The interface packages eddy links a processor against: the processor contract and
/// WASI 0.2's command-line world (stdio, environment, clocks, random, a filesystem and
/// sockets that give nothing).
const PROVIDED_PACKAGES: &[&str] =
    &["eddy:processor/", "wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/", "wasi:filesystem/", "wasi:sockets/"];

/// The top-level imports and exports of a component, by name (e.g.
/// `wasi:http/types@0.2.3`). Nested modules' and components' imports are satisfied
/// inside the component.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Interfaces {
    /// What the component imports.
    pub imports: Vec<String>,
    /// What the component exports.
    pub exports: Vec<String>,
}

/// The top-level imports and exports of the component in `bytes`.
pub fn component_interfaces(bytes: &[u8]) -> Result<Interfaces> {
    let mut interfaces = Interfaces::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    interfaces.imports.push(import?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    interfaces.exports.push(export?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(interfaces)
}

/// Refuses module `name` when it imports an interface eddy does not provide, naming
/// each and what to do; a module that cannot be read is left to the compiler's error.
pub fn check_imports(name: &str, bytes: &[u8]) -> Result<()> {
    let Ok(Interfaces { imports, .. }) = component_interfaces(bytes) else { return Ok(()) };
    let missing: Vec<&str> = imports
        .iter()
        .map(String::as_str)
        .filter(|import| !PROVIDED_PACKAGES.iter().any(|package| import.starts_with(package)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let hint = if missing.iter().any(|import| import.starts_with("wasi:http/")) {
        "; a JavaScript module built with componentize-js needs `-d http fetch-event` \
         (`eddy build` passes it)"
    } else {
        ""
    };
    bail!(
        "module '{name}' imports {}, which eddy does not provide: a processor may import only \
         eddy:processor's state, timers and logging and WASI's cli, io, clocks, random, filesystem \
         and sockets; build it without {}{hint}",
        missing.join(", "),
        if missing.len() == 1 { "that import" } else { "those imports" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component with the given top-level instance imports, written by hand in the
    /// binary format (version 0xd, layer 1).
    fn component_importing(names: &[&str]) -> Vec<u8> {
        let mut bytes = vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        // Type section: one empty instance type.
        bytes.extend([0x07, 0x03, 0x01, 0x42, 0x00]);
        let mut section = vec![names.len() as u8];
        for name in names {
            section.push(0x00); // plain kebab/interface name
            section.push(name.len() as u8);
            section.extend(name.as_bytes());
            section.extend([0x05, 0x00]); // an instance of type 0
        }
        bytes.push(0x0a);
        bytes.push(section.len() as u8);
        bytes.extend(section);
        bytes
    }

    #[test]
    fn the_imports_of_a_component_are_listed() {
        let bytes = component_importing(&["wasi:io/error@0.2.0", "eddy:processor/state@0.1.0"]);
        assert_eq!(
            component_interfaces(&bytes).unwrap().imports,
            ["wasi:io/error@0.2.0", "eddy:processor/state@0.1.0"]
        );
        check_imports("ok.wasm", &bytes).unwrap();
    }

    #[test]
    fn an_import_eddy_does_not_provide_is_refused_by_name_with_the_fix() {
        let bytes = component_importing(&["wasi:io/error@0.2.0", "wasi:http/types@0.2.3"]);
        let error = check_imports("app.wasm", &bytes).unwrap_err().to_string();
        assert!(
            error.contains("module 'app.wasm' imports wasi:http/types@0.2.3, which eddy does not provide"),
            "{error}"
        );
        assert!(error.contains("-d http fetch-event"), "{error}");
    }
}
