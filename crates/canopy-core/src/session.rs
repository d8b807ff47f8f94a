//! Convergence memory: per client session, what Canopy has returned and what
//! the client expanded.
//!
//! Sessions are identified by an opaque id chosen by the caller (one per MCP
//! connection, one per CLI process, a header in the HTTP service). Memory is
//! bounded: at most [`MAX_SESSIONS`] sessions, each forgetting after
//! [`SESSION_TTL`] of inactivity, each remembering at most
//! [`MAX_HANDLES_PER_SESSION`] handles.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::handle::HandleId;

/// Most sessions remembered at once (least recently used are dropped).
pub const MAX_SESSIONS: usize = 1024;
/// A session idle this long is forgotten.
pub const SESSION_TTL: Duration = Duration::from_secs(2 * 60 * 60);
/// Most handles remembered per session (per kind).
pub const MAX_HANDLES_PER_SESSION: usize = 20_000;

/// What one session has seen.
#[derive(Debug, Default, Clone)]
pub struct Session {
    /// Handles returned in packs or queries.
    pub returned: HashSet<HandleId>,
    /// Handles the client expanded.
    pub expanded: HashSet<HandleId>,
    /// Packs built in this session.
    pub packs: u32,
    last_used: Option<Instant>,
}

/// All sessions of one engine.
#[derive(Debug, Default)]
pub struct SessionStore {
    sessions: HashMap<String, Session>,
}

impl SessionStore {
    fn evict(&mut self, now: Instant) {
        self.sessions.retain(|_, s| {
            s.last_used
                .is_none_or(|t| now.duration_since(t) < SESSION_TTL)
        });
        if self.sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
        {
            self.sessions.remove(&oldest);
        }
    }

    /// The session with this id, created if new.
    pub fn get_mut(&mut self, id: &str) -> &mut Session {
        let now = Instant::now();
        if !self.sessions.contains_key(id) {
            self.evict(now);
        }
        let s = self.sessions.entry(id.to_string()).or_default();
        s.last_used = Some(now);
        s
    }

    /// A copy of the session (empty if unknown).
    pub fn snapshot(&self, id: &str) -> Session {
        self.sessions.get(id).cloned().unwrap_or_default()
    }

    /// Records handles returned to the client.
    pub fn record_returned(&mut self, id: &str, handles: impl IntoIterator<Item = HandleId>) {
        let s = self.get_mut(id);
        for h in handles {
            if s.returned.len() < MAX_HANDLES_PER_SESSION {
                s.returned.insert(h);
            }
        }
    }

    /// Records handles the client expanded.
    pub fn record_expanded(&mut self, id: &str, handles: impl IntoIterator<Item = HandleId>) {
        let s = self.get_mut(id);
        for h in handles {
            if s.expanded.len() < MAX_HANDLES_PER_SESSION {
                s.expanded.insert(h);
            }
        }
    }

    /// Number of live sessions (the tests check the bound).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_bounded() {
        let mut store = SessionStore::default();
        for i in 0..(MAX_SESSIONS + 10) {
            store.get_mut(&format!("s{i}"));
        }
        assert!(store.len() <= MAX_SESSIONS);
    }

    #[test]
    fn remembers_per_session() {
        let mut store = SessionStore::default();
        let h = HandleId::derive("a", "function", "f", 0);
        store.record_expanded("a", [h.clone()]);
        assert!(store.snapshot("a").expanded.contains(&h));
        assert!(store.snapshot("b").expanded.is_empty());
    }
}
