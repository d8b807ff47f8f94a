//! The stored unit vectors of one index state as one flat file beside the
//! index, for a one-off search (issue 31 item 6).
//!
//! A one-off `canopy context` scores every stored vector once. Read from
//! SQLite, each file's blob is assembled from its overflow pages and the
//! files' states are read to check each blob against its file: on Django
//! (5,350 blobs, 23.7 MB) about 13 ms of CPU a call. The file holds the
//! same rows, the ones such a search found usable, written after it, so
//! the next one-off search maps it and scores the rows in place.
//!
//! It is used only for the index state it was written at: its header
//! records the index's state stamp (`meta.state_stamp`, drawn anew by
//! every write that changes the indexed files or the stored vectors, and
//! different in a recreated index, whose generations start again), the
//! generation, and the model's fingerprint and dimensions; its length must
//! be exactly the header's count of rows. Anything else (another state, a
//! short or foreign file) and the search reads SQLite as before. It is
//! written to a temporary file, flushed, and renamed over the old one, so
//! a reader sees a whole file or the previous one, never a half-written
//! one, and a file being read is never changed in place.
//!
//! Layout, little-endian: `MAGIC`, then the lengths (u32) and bytes of the
//! stamp and the fingerprint, the generation (u64), the row count (u64),
//! then a [`Quantized::to_blob`] blob: `dim` (u32) and per row its id
//! (i64), scale (f32) and `dim` int8 values.
//!
//! [`Quantized::to_blob`]: crate::embed::Quantized::to_blob

use std::io::Write;
use std::path::{Path, PathBuf};

/// The file's first bytes (format version 1).
const MAGIC: &[u8; 8] = b"CNPYVEC1";
/// Its name, in the index's directory.
const FILE_NAME: &str = "unit-vectors.bin";

/// What a vector file must have been written for.
pub(crate) struct Key<'a> {
    pub(crate) stamp: &'a str,
    pub(crate) generation: u64,
    pub(crate) fingerprint: &'a str,
    pub(crate) dim: usize,
}

impl Key<'_> {
    fn header(&self, rows: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.stamp.len() + self.fingerprint.len());
        out.extend_from_slice(MAGIC);
        for text in [self.stamp, self.fingerprint] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&rows.to_le_bytes());
        out.extend_from_slice(&(self.dim as u32).to_le_bytes());
        out
    }
}

/// The vector file of the index at `db_path`.
pub(crate) fn path_beside(db_path: &Path) -> PathBuf {
    db_path.with_file_name(FILE_NAME)
}

/// A vector file's bytes, mapped or read.
pub(crate) struct VectorFile {
    bytes: Bytes,
    /// Where the blob (`dim`, then the rows) starts.
    blob_at: usize,
}

impl VectorFile {
    /// The file at `path` if it was written for `key` and is whole; `None`
    /// (and the caller reads SQLite) otherwise, whatever the reason.
    pub(crate) fn open(path: &Path, key: &Key<'_>) -> Option<VectorFile> {
        let file = std::fs::File::open(path).ok()?;
        let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
        let bytes = Bytes::of(file, len)?;
        let at = {
            let data: &[u8] = bytes.as_slice();
            let rows = rows_if_for(data, key)?;
            let blob_at = key.header(0).len() - 4;
            let expected = (12 + key.dim as u64)
                .checked_mul(rows)?
                .checked_add(blob_at as u64 + 4)?;
            (expected == len as u64).then_some(blob_at)?
        };
        Some(VectorFile { bytes, blob_at: at })
    }

    /// The rows as a [`crate::embed::Quantized::to_blob`] blob.
    pub(crate) fn blob(&self) -> &[u8] {
        &self.bytes.as_slice()[self.blob_at..]
    }
}

/// The row count the header gives, when the header is `key`'s.
fn rows_if_for(data: &[u8], key: &Key<'_>) -> Option<u64> {
    let mut rest = data.strip_prefix(MAGIC)?;
    for want in [key.stamp, key.fingerprint] {
        let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let text = rest.get(4..4 + len)?;
        if text != want.as_bytes() {
            return None;
        }
        rest = &rest[4 + len..];
    }
    let number = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(rest.get(at..at + 8)?.try_into().ok()?))
    };
    let dim = u32::from_le_bytes(rest.get(16..20)?.try_into().ok()?);
    (number(0)? == key.generation && dim as usize == key.dim).then_some(number(8)?)
}

/// Writes the rows `rows` (the bodies of `to_blob` blobs: rows without the
/// leading `dim`) as the vector file for `key`: a temporary file in the
/// same directory, flushed to disk, then renamed over `path`.
pub(crate) fn write(path: &Path, key: &Key<'_>, rows: &[u8]) -> std::io::Result<()> {
    let row = 12 + key.dim;
    if !rows.len().is_multiple_of(row) {
        return Err(std::io::Error::other("rows of another size"));
    }
    sweep_temps(path);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = path.with_file_name(format!("{FILE_NAME}.{}-{nanos}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&key.header((rows.len() / row) as u64))?;
        file.write_all(rows)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes the temporary files of writers killed before their rename
/// ([`crate::temp_files`]), so none stays behind for good.
fn sweep_temps(path: &Path) {
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
        let prefix = format!("{}.", name.to_string_lossy());
        crate::temp_files::sweep(dir, &prefix, crate::temp_files::STALE_TEMP);
    }
}

/// A file's bytes: mapped read-only where the platform allows, else read.
enum Bytes {
    #[cfg(unix)]
    Mapped(Mapping),
    Read(Vec<u8>),
}

impl Bytes {
    fn of(file: std::fs::File, len: usize) -> Option<Bytes> {
        #[cfg(unix)]
        if let Some(m) = Mapping::new(&file, len) {
            return Some(Bytes::Mapped(m));
        }
        let mut data = Vec::with_capacity(len);
        std::io::Read::read_to_end(&mut std::io::Read::take(file, len as u64), &mut data).ok()?;
        Some(Bytes::Read(data))
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            #[cfg(unix)]
            Bytes::Mapped(m) => m.as_slice(),
            Bytes::Read(v) => v,
        }
    }
}

/// A read-only private mapping of a whole file.
///
/// Mapped rather than read: the scan touches every byte once, and a copy
/// into the heap (24 MB on Django) costs its page faults and the copy.
/// Safe to read because the file is never written in place: [`write`]
/// renames a new file over it, and a mapping keeps the old file's pages.
#[cfg(unix)]
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

#[cfg(unix)]
impl Mapping {
    fn new(file: &std::fs::File, len: usize) -> Option<Mapping> {
        use std::os::unix::io::AsRawFd;
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh read-only private mapping of an open file, no
        // address hint; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | populate(),
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mapping { ptr, len })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until `drop`, and the file
        // behind them is never changed in place (see the type's docs).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

/// Pages read in with the mapping: the scan reads every one.
#[cfg(target_os = "linux")]
fn populate() -> libc::c_int {
    libc::MAP_POPULATE
}

#[cfg(all(unix, not(target_os = "linux")))]
fn populate() -> libc::c_int {
    0
}

#[cfg(unix)]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no slice of it
        // outlives `self` (they borrow it).
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}
