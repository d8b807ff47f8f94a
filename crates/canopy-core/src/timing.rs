//! Phase timings of a request on stderr, at debug level under the target
//! `canopy::timing` (`CANOPY_LOG=canopy::timing=debug canopy context …`):
//! where a one-off process's milliseconds go (issue 31 item 6), without a
//! profiler and in any build. Each phase logs its wall-clock ms and, on
//! Linux, the CPU ms its thread ran (`/proc/thread-self/schedstat`), which
//! a busy machine moves much less than the wall clock. Off, a phase costs
//! one clock read and a disabled-callsite check.

use std::time::Instant;

/// A point in a thread's time: the wall clock and its CPU time so far.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    wall: Instant,
    cpu_ns: Option<u64>,
}

/// Now, for [`phase`].
pub fn mark() -> Mark {
    Mark {
        wall: Instant::now(),
        cpu_ns: enabled().then(thread_cpu_ns).flatten(),
    }
}

fn enabled() -> bool {
    tracing::enabled!(target: "canopy::timing", tracing::Level::DEBUG)
}

/// CPU time this thread has run, ns (Linux: the first field of
/// `/proc/thread-self/schedstat`); `None` elsewhere.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Logs `name` with the wall-clock and CPU milliseconds since `since`, and
/// returns now (the start of the next phase).
pub fn phase(name: &'static str, since: Mark) -> Mark {
    let now = mark();
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let cpu = match (since.cpu_ns, now.cpu_ns) {
        (Some(a), Some(b)) => ms(b.saturating_sub(a)),
        _ => "-".to_string(),
    };
    tracing::debug!(
        target: "canopy::timing",
        phase = name,
        ms = ms((now.wall - since.wall).as_nanos() as u64),
        cpu_ms = cpu,
    );
    now
}
