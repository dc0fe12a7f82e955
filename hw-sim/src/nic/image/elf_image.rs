//! The `mrc-nic` ELF the `elf` level runs: read once per path and shared by every core of
//! the run (and of later runs in the process).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// ELF bytes by path (`None`: the image built from this tree).
type Images = HashMap<Option<PathBuf>, Arc<[u8]>>;

/// The ELF at `path`, or (`None`) the NIC image built from this source tree (`cargo build
/// --release` in `firmware/image`, as `just firmware` does; quick when it is up to date).
///
/// # Errors
/// The image could not be built or read.
pub(crate) fn load(path: Option<&Path>) -> Result<Arc<[u8]>, String> {
    static CACHE: Mutex<Option<Images>> = Mutex::new(None);
    let key = path.map(Path::to_path_buf);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    if let Some(b) = map.get(&key) {
        return Ok(b.clone());
    }
    let file = match path {
        Some(p) => p.to_path_buf(),
        None => mrc_elfcore::build::nic_image(None)?,
    };
    let bytes: Arc<[u8]> = std::fs::read(&file)
        .map_err(|e| format!("the NIC image {}: {e}", file.display()))?
        .into();
    map.insert(key, bytes.clone());
    Ok(bytes)
}
