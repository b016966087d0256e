//! The seam between the engine and the bytes: every file access goes through [`Backend`].
//!
//! The engine only ever reads at an offset, appends at the end, flushes to stable storage and
//! truncates a damaged tail. Production uses [`FileBackend`]; tests use [`MemBackend`], which
//! keeps the bytes that reached "stable storage" apart from the live ones so that a crash can
//! be simulated exactly, and which can be told to fail writes and syncs.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Positional file access used by the engine. Reads may run on any thread at any time.
#[allow(clippy::len_without_is_empty)] // a file's length, not a collection's
pub trait Backend: Send + Sync + 'static {
    /// Fills `buf` from `offset`; a short file is an `UnexpectedEof` error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `data` at `offset` (always the current end of the file).
    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Makes everything written so far durable.
    fn sync(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Cuts the file to `len` bytes.
    fn truncate(&self, len: u64) -> io::Result<()>;
    /// Whether `path` still names this file (not another one put there since, after this
    /// one was moved away or removed). Files not in a file system always are.
    fn is_at(&self, _path: &Path) -> io::Result<bool> {
        Ok(true)
    }
}

/// A real file, read with `pread` and made durable with `fdatasync`.
pub struct FileBackend {
    file: File,
}

impl FileBackend {
    /// Opens an existing file for reading and appending, locked against other writers.
    pub fn open(path: &Path) -> io::Result<FileBackend> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        FileBackend::locked(file)
    }

    /// Opens an existing file only to read it, without the writer lock (for checking a file
    /// a server may have open).
    pub fn open_unlocked(path: &Path) -> io::Result<FileBackend> {
        Ok(FileBackend {
            file: OpenOptions::new().read(true).open(path)?,
        })
    }

    /// Creates a new file, failing if one exists, locked against other writers.
    pub fn create(path: &Path) -> io::Result<FileBackend> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        FileBackend::locked(file)
    }

    /// Takes the file's writer lock. A lock held only briefly (by a store of this process
    /// still closing on its writer thread, or by a child process between its fork and exec)
    /// is waited for, up to a second; a lock held longer is another writer.
    fn locked(file: File) -> io::Result<FileBackend> {
        for attempt in 0..100 {
            match file.try_lock() {
                Ok(()) => return Ok(FileBackend { file }),
                Err(std::fs::TryLockError::WouldBlock) if attempt < 99 => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(std::fs::TryLockError::WouldBlock) => break,
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            "the store file is open in another writer",
        ))
    }
}

impl Backend for FileBackend {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn is_at(&self, path: &Path) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let (mine, there) = match (self.file.metadata(), std::fs::metadata(path)) {
            (Ok(mine), Ok(there)) => (mine, there),
            (_, Err(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        Ok((mine.dev(), mine.ino()) == (there.dev(), there.ino()))
    }
}

/// Makes a directory entry change (create, rename) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Makes the directory entry of `path` durable (its parent, or `.` for a bare name).
pub fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => sync_dir(Path::new(".")),
    }
}

/// An in-memory file for tests, with fault injection and crash simulation.
///
/// `live` holds what readers see; `durable` holds what would survive a crash. A successful
/// [`Backend::sync`] makes durable what was written since the last sync; a failed one makes
/// none of it durable and forgets it was written, as a kernel that drops the dirty pages of
/// a failed write-back does: no later sync makes those bytes durable.
#[derive(Clone, Default)]
pub struct MemBackend {
    inner: Arc<MemInner>,
}

#[derive(Default)]
struct MemInner {
    bytes: Mutex<MemBytes>,
    /// Writes fail once the live file would exceed this many bytes (simulated disk full).
    capacity: AtomicU64,
    /// Number of upcoming syncs that fail with EIO.
    failing_syncs: AtomicU64,
}

#[derive(Default, Clone)]
struct MemBytes {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Byte ranges written since the last sync.
    dirty: Vec<(usize, usize)>,
}

impl MemBackend {
    /// An empty file with unlimited capacity.
    pub fn new() -> MemBackend {
        let m = MemBackend::default();
        m.inner.capacity.store(u64::MAX, Ordering::SeqCst);
        m
    }

    /// A file whose live and durable contents are `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> MemBackend {
        let m = MemBackend::new();
        *m.inner.bytes.lock().expect("mem backend lock") = MemBytes {
            live: bytes.clone(),
            durable: bytes,
            dirty: Vec::new(),
        };
        m
    }

    /// The bytes readers currently see.
    pub fn live_bytes(&self) -> Vec<u8> {
        self.inner
            .bytes
            .lock()
            .expect("mem backend lock")
            .live
            .clone()
    }

    /// The bytes that survive a crash right now.
    pub fn durable_bytes(&self) -> Vec<u8> {
        self.inner
            .bytes
            .lock()
            .expect("mem backend lock")
            .durable
            .clone()
    }

    /// Limits the file size: writes past it fail like a full disk.
    pub fn set_capacity(&self, bytes: u64) {
        self.inner.capacity.store(bytes, Ordering::SeqCst);
    }

    /// The next `n` syncs fail with an I/O error (and make nothing durable).
    pub fn fail_syncs(&self, n: u64) {
        self.inner.failing_syncs.store(n, Ordering::SeqCst);
    }
}

impl Backend for MemBackend {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let b = self.inner.bytes.lock().expect("mem backend lock");
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let end = start.checked_add(buf.len()).ok_or_else(eof)?;
        let src = b.live.get(start..end).ok_or_else(eof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut b = self.inner.bytes.lock().expect("mem backend lock");
        let end = offset + data.len() as u64;
        if end > self.inner.capacity.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "simulated disk full",
            ));
        }
        let (start, end) = (offset as usize, end as usize);
        if b.live.len() < end {
            b.live.resize(end, 0);
        }
        b.live[start..end].copy_from_slice(data);
        b.dirty.push((start, end));
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut b = self.inner.bytes.lock().expect("mem backend lock");
        let dirty = std::mem::take(&mut b.dirty);
        let failing = &self.inner.failing_syncs;
        if failing.load(Ordering::SeqCst) > 0 {
            failing.fetch_sub(1, Ordering::SeqCst);
            return Err(io::Error::other("simulated fsync failure"));
        }
        let len = b.live.len();
        b.durable.resize(len, 0);
        for (start, end) in dirty {
            let (start, end) = (start.min(len), end.min(len));
            let written = b.live[start..end].to_vec();
            b.durable[start..end].copy_from_slice(&written);
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self
            .inner
            .bytes
            .lock()
            .expect("mem backend lock")
            .live
            .len() as u64)
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner
            .bytes
            .lock()
            .expect("mem backend lock")
            .live
            .resize(len as usize, 0);
        Ok(())
    }
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file")
}
