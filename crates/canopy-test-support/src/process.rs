//! Child processes that end with the test: a failing assertion unwinds
//! through [`KillOnDrop`], which kills and reaps the child, so no test
//! leaves a process running.

use std::process::Child;

/// A child process killed (SIGKILL) and reaped when dropped.
pub struct KillOnDrop(pub Child);

impl KillOnDrop {
    /// Kills and reaps the child now (idempotent).
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill();
    }
}
