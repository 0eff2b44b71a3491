//! The on-disk cache of compiled modules. A compiled artifact is native code that
//! wasmtime loads without checking what it was compiled from, so each file carries
//! who it belongs to: a header with the module's SHA-256, the engine's compatibility
//! digest, and an HMAC-SHA256 over both and the artifact under a secret of this cache
//! (`cache.key`, created once, readable by its owner only). A file whose header names
//! another module or engine, or whose MAC does not verify (a swapped, damaged or
//! foreign file), is refused: the module is compiled again, with a warning, and the
//! file rewritten.
//!
//! `<sha256>-<engine digest, 16 hex>.cwasm`:
//! `EDDYCW01` · module SHA-256 (32 bytes) · engine digest (32) · MAC (32) · artifact.
//!
//! Only files this user owns and no other user may write are trusted: a compiled
//! module owned by another user or writable by others is refused (compiled again and
//! rewritten), and so is a key file owned by another user or readable or writable by
//! others (the cache is then not used, with a warning saying what to do).
//!
//! Every module version a machine ever ran would stay, tens of MB each for a Python or
//! JavaScript one: past [`MAX_CACHE_BYTES`] a write removes the files used least
//! recently (a read marks its file used).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use wasmtime::Engine;

const MAGIC: &[u8; 8] = b"EDDYCW01";
const HEADER_BYTES: usize = MAGIC.len() + 3 * 32;
const KEY_FILE: &str = "cache.key";

/// How many bytes of compiled modules the cache keeps.
const MAX_CACHE_BYTES: u64 = 2 << 30;

/// A cache directory and its secret.
pub(super) struct ModuleCache {
    dir: PathBuf,
    key: [u8; 32],
    engine: [u8; 32],
}

impl ModuleCache {
    /// Opens the cache in `dir` for `engine`, creating the directory and its secret
    /// when missing.
    pub fn open(dir: &Path, engine: &Engine) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create the module cache {}", dir.display()))?;
        Ok(Self { dir: dir.to_path_buf(), key: cache_key(dir)?, engine: engine_digest(engine) })
    }

    /// The file of the module whose bytes hash to `module_sha256` (hex).
    pub fn file(&self, module_sha256: &str) -> PathBuf {
        self.dir.join(format!("{module_sha256}-{}.cwasm", hex(&self.engine[..8])))
    }

    /// The artifact cached for `module` (its SHA-256 in hex): `Ok(None)` when there is
    /// none, an error saying why when the file is there but not this module's.
    pub fn read(&self, module_sha256: &str) -> Result<Option<Vec<u8>>> {
        let file = self.file(module_sha256);
        let mut bytes = match read_trusted(&file, OTHERS_WRITE) {
            Ok(bytes) => bytes,
            Err(Untrusted::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(Untrusted::Io(error)) => return Err(error).with_context(|| format!("cannot read {}", file.display())),
            Err(Untrusted::Foreign(why)) => bail!("{why}"),
        };
        let module = unhex(module_sha256)?;
        if bytes.len() < HEADER_BYTES || &bytes[..MAGIC.len()] != MAGIC {
            bail!("it has no eddy header (written by an older eddy, or not by eddy)");
        }
        let (header, artifact) = bytes.split_at(HEADER_BYTES);
        let field = |index: usize| &header[MAGIC.len() + 32 * index..MAGIC.len() + 32 * (index + 1)];
        if field(0) != module {
            bail!("it was compiled from another module (SHA-256 {})", hex(field(0)));
        }
        if field(1) != self.engine {
            bail!("it was compiled by another engine configuration");
        }
        if !same(field(2), &mac(&self.key, &module, &self.engine, artifact)) {
            bail!("its integrity check fails (damaged, or not written with this cache's key)");
        }
        bytes.drain(..HEADER_BYTES);
        // Marked used, for the pruning of a later write (a file that cannot be marked
        // is only the first to go).
        if let Ok(handle) = std::fs::File::options().write(true).open(&file) {
            let _ = handle.set_modified(std::time::SystemTime::now());
        }
        Ok(Some(bytes))
    }

    /// Writes `artifact`, compiled from the module `module_sha256`, atomically.
    pub fn write(&self, module_sha256: &str, artifact: &[u8]) -> Result<()> {
        let module = unhex(module_sha256)?;
        let mut bytes = Vec::with_capacity(HEADER_BYTES + artifact.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&module);
        bytes.extend_from_slice(&self.engine);
        bytes.extend_from_slice(&mac(&self.key, &module, &self.engine, artifact));
        bytes.extend_from_slice(artifact);
        let file = self.file(module_sha256);
        crate::util::fs::write_atomic_with_mode(&file, &bytes, 0o644)?;
        prune(&self.dir, &file, MAX_CACHE_BYTES);
        Ok(())
    }
}

/// Removes the compiled modules of `dir` used least recently (but `keep`) until they
/// take at most `max_bytes`. Best effort: a file another process removed first, or one
/// that cannot be removed, is passed over.
fn prune(dir: &Path, keep: &Path, max_bytes: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let path = entry.path();
            let metadata = entry.metadata().ok()?;
            let cached = path.extension().is_some_and(|extension| extension == "cwasm") && metadata.is_file();
            cached.then(|| (metadata.modified().unwrap_or(std::time::UNIX_EPOCH), metadata.len(), path))
        })
        .collect();
    let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= max_bytes {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

/// Permission bits that let users other than the owner write a file.
const OTHERS_WRITE: u32 = 0o022;
/// Permission bits that let users other than the owner read or write a file.
const OTHERS_ANY: u32 = 0o077;

/// Why a cache file was not read.
enum Untrusted {
    Io(std::io::Error),
    /// Another user owns it or may write it; says which.
    Foreign(String),
}

/// The bytes of the cache file `path`, if this process's user owns it and none of
/// the permission bits `denied` is set (checked on the open file, so that a file
/// swapped in between cannot pass).
fn read_trusted(path: &Path, denied: u32) -> Result<Vec<u8>, Untrusted> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let mut file = std::fs::File::open(path).map_err(Untrusted::Io)?;
    let meta = file.metadata().map_err(Untrusted::Io)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(Untrusted::Foreign(format!(
            "{} belongs to user id {}, not to this user ({me}), who would run code it wrote",
            path.display(),
            meta.uid()
        )));
    }
    if meta.mode() & denied != 0 {
        let who = if denied == OTHERS_WRITE { "writable" } else { "readable or writable" };
        return Err(Untrusted::Foreign(format!(
            "{} is {who} by other users (mode {:o})",
            path.display(),
            meta.mode() & 0o777
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).map_err(Untrusted::Io)?;
    Ok(bytes)
}

/// The cache's secret, created (32 random bytes, owner-only) if missing or unusable;
/// refused if another user owns it or may read or write it.
fn cache_key(dir: &Path) -> Result<[u8; 32]> {
    let path = dir.join(KEY_FILE);
    let refuse = |why: String| {
        anyhow::anyhow!(
            "the module cache key {why}; remove it (eddy makes a new one) or set EDDY_CACHE_DIR to a directory \
             of your own"
        )
    };
    match read_trusted(&path, OTHERS_ANY) {
        Ok(bytes) => {
            if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
                return Ok(key);
            }
        }
        Err(Untrusted::Foreign(why)) => return Err(refuse(why)),
        Err(Untrusted::Io(_)) => {}
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|error| anyhow::anyhow!("cannot draw a module cache key: {error}"))?;
    // Written whole under another name, then linked into place: a concurrent start
    // sees no key or the whole of one, and the first to link wins.
    let temp = dir.join(format!(".{KEY_FILE}.{}.tmp", std::process::id()));
    write_private(&temp, &key)?;
    let linked = std::fs::hard_link(&temp, &path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(key),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let bytes = match read_trusted(&path, OTHERS_ANY) {
                Ok(bytes) => bytes,
                Err(Untrusted::Foreign(why)) => return Err(refuse(why)),
                Err(Untrusted::Io(error)) => {
                    return Err(error).with_context(|| format!("cannot read {}", path.display()));
                }
            };
            match <[u8; 32]>::try_from(bytes.as_slice()) {
                Ok(key) => Ok(key),
                Err(_) => {
                    // Not a key (damaged): replace it; what it signed is compiled again.
                    crate::util::fs::write_atomic_with_mode(&path, &key, 0o600)?;
                    Ok(key)
                }
            }
        }
        Err(error) => Err(error).with_context(|| format!("cannot create {}", path.display())),
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).with_context(|| format!("cannot write {}", path.display()))
}

/// SHA-256 of the engine's compatibility hash: artifacts of one engine
/// configuration and wasmtime version load only in an engine with the same.
fn engine_digest(engine: &Engine) -> [u8; 32] {
    struct Sha256Hasher(Sha256);
    impl Hasher for Sha256Hasher {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            let digest = self.0.clone().finalize();
            u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
        }
    }
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.finalize().into()
}

/// HMAC-SHA256 (RFC 2104) under `key` of the module's and engine's digests and the
/// artifact.
fn mac(key: &[u8; 32], module: &[u8], engine: &[u8; 32], artifact: &[u8]) -> [u8; 32] {
    hmac_sha256(key, &[MAGIC, module, engine, artifact])
}

fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|byte| byte ^ 0x36));
    message.iter().for_each(|part| inner.update(part));
    let outer = Sha256::new().chain_update(block.map(|byte| byte ^ 0x5c)).chain_update(inner.finalize());
    outer.finalize().into()
}

/// Equality that takes as long whatever the bytes.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Lowercase hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Result<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        bail!("'{text}' is not hex");
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| anyhow::anyhow!("'{text}' is not hex"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", &[b"what do ya ", b"want for nothing?"]);
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block is hashed first.
        let mac = hmac_sha256(&[0xaa; 131], &[b"Test Using Larger Than Block-Size Key - Hash Key First"]);
        assert_eq!(hex(&mac), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn past_its_size_the_cache_removes_the_modules_used_least_recently() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let engine = Engine::default();
        let cache = ModuleCache::open(dir.path(), &engine)?;
        let sha = |n: u8| hex(&[n; 32]);
        let now = std::time::SystemTime::now();
        for n in 0..4u8 {
            cache.write(&sha(n), &[n; 1000])?;
            // Written a minute apart, the first the oldest.
            let at = now - std::time::Duration::from_secs(60 * u64::from(4 - n));
            std::fs::File::options().write(true).open(cache.file(&sha(n)))?.set_modified(at)?;
        }
        // Module 0, the oldest written, is read: now the most recently used.
        assert_eq!(cache.read(&sha(0))?, Some(vec![0; 1000]));
        let file_bytes = (HEADER_BYTES + 1000) as u64;
        prune(dir.path(), &cache.file(&sha(3)), 2 * file_bytes);
        let left: Vec<bool> = (0..4).map(|n| cache.file(&sha(n)).exists()).collect();
        assert_eq!(left, [true, false, false, true], "modules 1 and 2 were used least recently");
        assert!(dir.path().join(KEY_FILE).exists(), "the key is no module");
        // The file just written stays, even alone over the size.
        prune(dir.path(), &cache.file(&sha(3)), 1);
        let left: Vec<bool> = (0..4).map(|n| cache.file(&sha(n)).exists()).collect();
        assert_eq!(left, [false, false, false, true]);
        Ok(())
    }

    #[test]
    fn the_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let key = cache_key(dir.path()).expect("made");
        assert_eq!(cache_key(dir.path()).expect("read"), key);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE)).expect("key file").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.path().join(KEY_FILE), b"short").expect("damaged");
        let replaced = cache_key(dir.path()).expect("replaced");
        assert_ne!(replaced, key);
        assert_eq!(std::fs::read(dir.path().join(KEY_FILE)).expect("key"), replaced);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE)).expect("key file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "a replaced key is private too");
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_key_or_module_other_users_may_write_is_refused() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let engine = Engine::default();
        let cache = ModuleCache::open(dir.path(), &engine)?;
        let sha = hex(&[7; 32]);
        cache.write(&sha, b"artifact")?;
        assert_eq!(cache.read(&sha)?, Some(b"artifact".to_vec()));
        for mode in [0o664, 0o646] {
            set_mode(&cache.file(&sha), mode);
            let refused = cache.read(&sha).expect_err("a module others may write").to_string();
            assert!(refused.contains("is writable by other users"), "{refused}");
        }
        set_mode(&cache.file(&sha), 0o644);
        assert_eq!(cache.read(&sha)?, Some(b"artifact".to_vec()), "readable by others is fine for a module");
        let key = dir.path().join(KEY_FILE);
        for mode in [0o640, 0o602] {
            set_mode(&key, mode);
            let refused = ModuleCache::open(dir.path(), &engine).err().expect("a key others may read").to_string();
            assert!(
                refused.contains("readable or writable by other users") && refused.contains("remove it"),
                "{refused}"
            );
        }
        Ok(())
    }

    #[test]
    fn a_key_or_module_owned_by_another_user_is_refused() -> Result<()> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(()); // only root can give a file to another user
        }
        let dir = tempfile::tempdir()?;
        let engine = Engine::default();
        let cache = ModuleCache::open(dir.path(), &engine)?;
        let sha = hex(&[9; 32]);
        cache.write(&sha, b"artifact")?;
        std::os::unix::fs::chown(cache.file(&sha), Some(65534), None)?;
        let refused = cache.read(&sha).expect_err("another user's module").to_string();
        assert!(refused.contains("belongs to user id 65534"), "{refused}");
        std::os::unix::fs::chown(dir.path().join(KEY_FILE), Some(65534), None)?;
        let refused = ModuleCache::open(dir.path(), &engine).err().expect("another user's key").to_string();
        assert!(refused.contains("belongs to user id 65534"), "{refused}");
        Ok(())
    }
}
