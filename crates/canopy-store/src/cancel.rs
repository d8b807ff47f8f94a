//! Cancellation of work a caller no longer wants.
//!
//! A front end that learns its caller gave up (an MCP client's
//! `notifications/cancelled`, a closed HTTP connection) raises a
//! [`CancelFlag`]. Work started inside [`within`] on the same thread sees
//! it: read snapshots make SQLite interrupt their statements (the same
//! progress handler that enforces the time budget, see
//! `Store::read_snapshot_within`), and index runs stop between files after
//! committing what they wrote, leaving the index as consistent as a killed
//! run would (see `index::run_index`). The operation then fails with
//! [`crate::CanopyError::Cancelled`].
//!
//! The flag travels in a thread-local rather than through every signature:
//! an engine call runs on one thread from start to finish (the parse
//! workers it fans out to never touch the database), so the thread is the
//! request.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A shared "stop" signal: cheap to clone, raised once, never lowered.
#[derive(Clone, Debug, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag not raised yet.
    pub fn new() -> CancelFlag {
        CancelFlag::default()
    }

    /// Asks the work watching this flag to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`CancelFlag::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

thread_local! {
    static CURRENT: RefCell<Option<CancelFlag>> = const { RefCell::new(None) };
}

/// Runs `f` with `flag` as this thread's cancellation flag (restoring the
/// previous one afterwards, so calls nest).
pub fn within<R>(flag: &CancelFlag, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<CancelFlag>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|c| c.borrow_mut().replace(flag.clone()));
    let _restore = Restore(previous);
    f()
}

/// This thread's flag, if the work runs inside [`within`].
pub fn current() -> Option<CancelFlag> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether this thread's work was cancelled.
pub fn requested() -> bool {
    current().is_some_and(|f| f.is_cancelled())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_seen_inside_within_and_restored_after() {
        assert!(!requested());
        let outer = CancelFlag::new();
        let inner = CancelFlag::new();
        inner.cancel();
        within(&outer, || {
            assert!(!requested());
            within(&inner, || assert!(requested()));
            assert!(!requested());
            outer.cancel();
            assert!(requested());
        });
        assert!(current().is_none());
    }
}
