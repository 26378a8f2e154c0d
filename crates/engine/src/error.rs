//! [`EngineError`]: the errors a statement, a transaction, a load or the data directory can
//! end with, one variant per subsystem.

use lockstack_bufmgr::BufferError;
use lockstack_clog::{ClogError, SubTransError};
use lockstack_lmgr::LockError;
use lockstack_procarray::ProcArrayError;
use lockstack_xlog::WalError;

use crate::tables::TableError;

/// Errors a statement or transaction can end with.
#[derive(Debug)]
pub enum EngineError {
    /// A heavyweight lock error: deadlock detected, lock timeout, NOWAIT.
    Lock(LockError),
    /// Buffer pool.
    Buffer(BufferError),
    /// WAL.
    Wal(WalError),
    /// CLOG.
    Clog(ClogError),
    /// pg_subtrans.
    SubTrans(SubTransError),
    /// ProcArray.
    ProcArray(ProcArrayError),
    /// Table load or scan.
    Table(TableError),
    /// An error of a SQL statement on user tables, with PostgreSQL's primary message
    /// (`relation "t" does not exist`, `could not obtain lock on row in relation "t"`, a
    /// duplicate key, a value out of range) or an `unsupported: ...` line.
    Sql(String),
    /// Misuse (statement outside a transaction block where one is needed, and the like).
    Usage(String),
    /// A pgbench client stopped on an error in its script during the run (division by zero,
    /// an undefined variable, `random()` arguments out of order...): pgbench 15's "client N
    /// aborted in command M of script S", after which the run is reported as failed (exit
    /// status 2). The client's open transaction was rolled back first.
    ClientAborted(String),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Lock(e) => write!(f, "{e}"),
            EngineError::Buffer(e) => write!(f, "{e}"),
            EngineError::Wal(e) => write!(f, "{e}"),
            EngineError::Clog(e) => write!(f, "{e}"),
            EngineError::SubTrans(e) => write!(f, "{e}"),
            EngineError::ProcArray(e) => write!(f, "{e}"),
            EngineError::Table(e) => write!(f, "{e}"),
            EngineError::Usage(m) => f.write_str(m),
            EngineError::Sql(m) => f.write_str(m),
            EngineError::ClientAborted(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for EngineError {}

macro_rules! from_err {
    ($t:ty, $v:ident) => {
        impl From<$t> for EngineError {
            fn from(e: $t) -> Self {
                EngineError::$v(e)
            }
        }
    };
}
from_err!(LockError, Lock);
from_err!(BufferError, Buffer);
from_err!(WalError, Wal);
from_err!(ClogError, Clog);
from_err!(SubTransError, SubTrans);
from_err!(ProcArrayError, ProcArray);
from_err!(TableError, Table);

impl From<crate::btree::BTreeError> for EngineError {
    fn from(e: crate::btree::BTreeError) -> Self {
        EngineError::Table(TableError::Index(e))
    }
}
