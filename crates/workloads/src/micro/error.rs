//! The micro-benchmarks' one error type ([`BenchError`]): a refused setting, a failure of the
//! structure under test, or a check of the run's own results that did not hold. Takes no lock.

use lockstack_bufmgr::BufferError;
use lockstack_common::AttachError;
use lockstack_lmgr::LmgrConfigError;
use lockstack_xlog::WalError;
use std::time::Duration;

/// Why a micro-benchmark was refused or failed. Displayed as one line: a setting's message
/// names its flag (`--threads must be 1..=1024, got 0`); the others are the failing layer's
/// own message.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A setting out of range or unknown; the message names the flag.
    #[error("{0}")]
    Config(String),
    /// The buffer manager failed.
    #[error("{0}")]
    Buffer(#[from] BufferError),
    /// A worker could not attach as a backend.
    #[error("{0}")]
    Attach(#[from] AttachError),
    /// The lock manager refused its configuration.
    #[error("{0}")]
    Lmgr(#[from] LmgrConfigError),
    /// The WAL failed.
    #[error("{0}")]
    Wal(#[from] WalError),
    /// A check of the run's own results failed, or a worker panicked.
    #[error("{0}")]
    Check(String),
}

/// The one-line message, for callers whose errors are still messages.
impl From<BenchError> for String {
    fn from(e: BenchError) -> String {
        e.to_string()
    }
}

/// The ranges every timed micro-benchmark shares: `--threads` 1..=1024 and `--duration` above
/// 0 and at most an hour.
///
/// # Errors
/// [`BenchError::Config`] naming the flag.
pub(crate) fn check_threads_and_duration(threads: usize, duration: Duration) -> Result<(), BenchError> {
    if threads == 0 || threads > 1024 {
        return Err(BenchError::Config(format!("--threads must be 1..=1024, got {threads}")));
    }
    if duration.is_zero() || duration > Duration::from_secs(3600) {
        return Err(BenchError::Config(format!(
            "--duration must be above 0 and at most 3600 s, got {duration:?}"
        )));
    }
    Ok(())
}
