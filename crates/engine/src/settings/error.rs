//! [`SettingsError`]: why a `--set`, a preset, a command's knob resolution or a pool-size
//! check failed. No locks.

use lockstack_bufmgr::BufferError;
use lockstack_common::knob::KnobError;
use lockstack_lmgr::LmgrConfigError;
use lockstack_procarray::ConfigError;
use lockstack_xlog::WalError;

/// Why a `--set`, a preset, a command's knob resolution or a pool-size check failed; each
/// displays as the one line the command prints.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A `--set` assignment the registry refused (no `=`, unknown key, bad value).
    #[error(transparent)]
    Knob(#[from] KnobError),
    /// `name` is not a preset; `valid` lists the presets, comma-separated.
    #[error("unknown preset \"{name}\" (valid: {valid})")]
    UnknownPreset {
        /// The name given.
        name: String,
        /// Every preset, comma-separated.
        valid: String,
    },
    /// A preset's own assignment failed (`prefix` is `preset` for [`crate::config::EngineConfig::preset`],
    /// `--preset` for a command).
    #[error("{prefix} {name}: {source}")]
    Preset {
        /// `preset` or `--preset`.
        prefix: &'static str,
        /// The preset.
        name: String,
        /// The registry's refusal.
        source: KnobError,
    },
    /// One of a command's own defaults failed to apply.
    #[error("{command}: {source}")]
    CommandDefault {
        /// The command (`lockstack locks`).
        command: &'static str,
        /// The registry's refusal.
        source: KnobError,
    },
    /// A flag that aliases a knob was given a value the knob refuses.
    #[error("{flag} must be {accepted}, got \"{value}\" (knob {key})")]
    BadFlag {
        /// The flag (`--vxid`).
        flag: String,
        /// The values the knob accepts.
        accepted: &'static str,
        /// The value given.
        value: String,
        /// The knob.
        key: &'static str,
    },
    /// `--set` of a knob the command does not read; `reads` lists those it does.
    #[error("--set {key}: {command} does not use this knob (it reads: {reads})")]
    NotRead {
        /// The knob.
        key: String,
        /// The command.
        command: &'static str,
        /// The knobs it reads, comma-separated.
        reads: String,
    },
    /// A flag and a `--set` assign the same knob.
    #[error("{flag} and --set {key} both set {key}: give one of them")]
    FlagAndSet {
        /// The flag.
        flag: String,
        /// The knob.
        key: String,
    },
    /// The configuration after the assignments fails a subsystem's check; `assignment` is the
    /// last `--set` of that subsystem, `reason` the subsystem's message.
    #[error("--set {assignment}: {reason}")]
    Invalid {
        /// The assignment blamed, trimmed.
        assignment: String,
        /// The subsystem's refusal.
        reason: ConfigCheckError,
    },
    /// As [`SettingsError::Invalid`], with no `--set` of that subsystem to blame (a preset's
    /// own value).
    #[error("engine configuration: {reason}")]
    InvalidConfiguration {
        /// The subsystem's refusal.
        reason: ConfigCheckError,
    },
    /// `-s` is not a positive scale whose pool size fits a `usize`.
    #[error("-s {scale}: invalid scaling factor")]
    BadScale {
        /// The scale given.
        scale: i64,
    },
    /// The pool for `scale` would exceed [`lockstack_bufmgr::MAX_BUFFERS`].
    #[error("-s {scale}: buffer pool would need {need} buffers (max {max})")]
    PoolTooLarge {
        /// The scale given.
        scale: i64,
        /// Buffers needed.
        need: usize,
        /// [`lockstack_bufmgr::MAX_BUFFERS`].
        max: usize,
    },
    /// The load at `scale` would not fit in the memory available now (MiB).
    #[error(
        "-s {scale}: the tables would need about {need_mib} MiB in memory, but only {avail_mib} MiB are available"
    )]
    OutOfMemory {
        /// The scale given.
        scale: i64,
        /// Estimated MiB the load takes.
        need_mib: u64,
        /// `MemAvailable`, MiB.
        avail_mib: u64,
    },
}

/// Why an engine configuration fails a subsystem's check ([`super::validate`], the checks
/// `Engine::new` makes); displays as the subsystem's one line.
#[derive(Debug, thiserror::Error)]
pub enum ConfigCheckError {
    /// An SLRU (`name`: `CLOG`, `pg_subtrans`) with fewer than 2 or more than 65536 buffers
    /// (`SimpleLruInit`'s bounds).
    #[error("{name} buffers must be 2..=65536, got {buffers}")]
    SlruBufferCount {
        /// The SLRU.
        name: &'static str,
        /// Its buffers.
        buffers: usize,
    },
    /// An SLRU with banked locking whose buffers are not a multiple of the bank size.
    #[error("{name} buffers must be a multiple of {bank} with banks (locking=banks), got {buffers}")]
    SlruBankMultiple {
        /// The SLRU.
        name: &'static str,
        /// [`lockstack_clog::SLRU_BANK_SIZE`].
        bank: usize,
        /// Its buffers.
        buffers: usize,
    },
    /// The lock manager's settings.
    #[error(transparent)]
    Lmgr(#[from] LmgrConfigError),
    /// The buffer pool's settings.
    #[error(transparent)]
    Bufmgr(#[from] BufferError),
    /// The WAL's settings.
    #[error(transparent)]
    Wal(#[from] WalError),
    /// The proc array's settings.
    #[error(transparent)]
    ProcArray(#[from] ConfigError),
}

impl From<SettingsError> for String {
    fn from(e: SettingsError) -> String {
        e.to_string()
    }
}
