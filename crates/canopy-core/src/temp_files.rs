//! Temporary files that a killed writer left behind.
//!
//! The caches kept beside the index (the history file, its diffs, the flat
//! vector file) are written atomically: a temporary file in the same
//! directory, flushed, then renamed over the old one. A writer killed
//! before its rename leaves the temporary file; the next writer sweeps
//! such files once they are old enough that no live writer can own them.

use std::path::Path;
use std::time::Duration;

/// A temporary file this old was left by a process that was killed before
/// its rename; nothing writes one for longer.
pub(crate) const STALE_TEMP: Duration = Duration::from_secs(3600);

/// Removes the temporary files in `dir` whose names start with `prefix`
/// and end in `.tmp`, and that are older than `stale`. Only those: the
/// index directory holds other files, and a younger temporary file may be
/// another process's write under way.
pub(crate) fn sweep(dir: &Path, prefix: &str, stale: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(prefix) && name.ends_with(".tmp")) {
            continue;
        }
        let modified = entry.metadata().and_then(|m| m.modified()).ok();
        let age = modified.and_then(|m| now.duration_since(m).ok());
        if age.is_some_and(|age| age > stale) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
