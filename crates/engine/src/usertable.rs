//! User tables: small general tables that a SQL front end (the isolation runner) creates,
//! fills with `INSERT ... VALUES` and drops, next to pgbench's fixed catalog
//! ([`crate::tables`]). Each one is a heap relation in the buffer pool with, when it has a
//! primary key, a B-tree on that key, so reads, row locks and waits on them go through the
//! same page, tuple-header, lock-manager and MultiXact code as pgbench's tables.
//!
//! Columns are `int4`, `int8` (also as `serial` / `bigserial`), whole-number `numeric` or
//! `text`. A row is stored in the engine's tuple layout ([`crate::heap::tuple`]): one 8-byte slot per column (the integer, or
//! a text column's byte length), then a filler holding an 8-byte null bitmap and the text
//! bytes in column order. The primary key is one column; the B-tree's 64-bit keys are the
//! integer itself or a hash of the text ([`index_key`]), rechecked against the row. `REFERENCES` is accepted by the front end but no foreign-key check is run.
//!
//! Source: the column types of PostgreSQL 18's `int4`, `int8` and `text`; `serial` as
//! `CREATE TABLE` expands it (a sequence and a default of `nextval`), with the sequence kept
//! in memory per table and never rolled back, as sequences are not.

use lockstack_bufmgr::vm::VisibilityMap;
use lockstack_common::Oid;
use lockstack_common::sync::{AtomicU32, Mutex, Ordering};
use std::collections::HashMap;
use std::sync::Arc;

use crate::btree::BTree;
use crate::heap::tuple::HEAP_TUPLE_HEADER_SIZE;
use crate::tables::CorruptRow;

/// A column's type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// `int4` / `integer` / `int` / `serial`: values in `i32`.
    Int4,
    /// `int8` / `bigint` / `bigserial`: values in `i64`.
    Int8,
    /// `text` / `varchar`: UTF-8 strings.
    Text,
    /// `numeric` / `decimal` holding whole numbers only: values in `i64` (a departure from
    /// PostgreSQL's arbitrary-precision `numeric`; the SQL front end has no fractional
    /// literals, so no value it can write is rounded).
    Numeric,
}

impl ColumnType {
    /// Whether values are integers (printed right-aligned by the isolation tester).
    pub fn is_integer(self) -> bool {
        !matches!(self, ColumnType::Text)
    }
}

/// A column value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    /// SQL NULL (sorts last, as `ORDER BY ... ASC` puts NULLs last).
    Null,
    /// An integer.
    Int(i64),
    /// A string.
    Text(String),
}

impl Value {
    /// The value in PostgreSQL's text output format; NULL prints as the empty string, as
    /// `PQgetvalue` returns it.
    pub fn to_text(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Int(i) => i.to_string(),
            Value::Text(s) => s.clone(),
        }
    }

    /// Orders two values as `ORDER BY` does: NULLs after every other value.
    pub fn sort_cmp(&self, other: &Value) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        match (self, other) {
            (Value::Null, Value::Null) => Equal,
            (Value::Null, _) => Greater,
            (_, Value::Null) => Less,
            (a, b) => a.cmp(b),
        }
    }
}

/// A column of a user table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnDef {
    /// Name, folded to lower case unless it was quoted.
    pub name: String,
    /// Type.
    pub ty: ColumnType,
    /// `DEFAULT` value (a constant); `None`: NULL, or the next serial value for a serial.
    pub default: Option<Value>,
    /// `serial` / `bigserial`: the default is the table's next sequence value.
    pub serial: bool,
    /// `NOT NULL` (implied by `PRIMARY KEY` and `serial`).
    pub not_null: bool,
}

/// The definition `CREATE TABLE` gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDef {
    /// Table name.
    pub name: String,
    /// Columns, in order.
    pub columns: Vec<ColumnDef>,
    /// Index of the primary key column, if any (an integer column).
    pub primary_key: Option<usize>,
}

impl TableDef {
    /// The column named `name`, by index.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The primary key constraint's name as PostgreSQL makes it (`<table>_pkey`).
    pub fn pkey_name(&self) -> String {
        format!("{}_pkey", self.name)
    }
}

/// A user table in the pool: its definition, heap relation, primary key and visibility map.
#[derive(Debug)]
pub struct UserTable {
    /// What `CREATE TABLE` said.
    pub def: TableDef,
    /// The heap relation.
    pub heap: Oid,
    /// The primary key's B-tree, if the table has one.
    pub index: Option<BTree>,
    /// The heap's visibility map.
    pub vm: VisibilityMap,
    /// The next value of each serial column's sequence (index: column).
    pub(crate) serials: Mutex<Vec<i64>>,
    /// Serialises inserts' choice of a target page (stand-in for the free space map: the
    /// last page, else a new one).
    pub(crate) insert_lock: Mutex<()>,
}

impl UserTable {
    /// The value `DEFAULT` gives column `i`: its next serial value (advancing the sequence,
    /// which a rollback does not undo), its constant default, or NULL.
    pub fn default_value(&self, i: usize) -> Value {
        let c = &self.def.columns[i];
        if c.serial {
            let mut sv = self.serials.lock();
            sv[i] += 1;
            return Value::Int(sv[i] - 1);
        }
        c.default.clone().unwrap_or(Value::Null)
    }
}

/// The user tables of an engine, by name, and the OIDs they get.
#[derive(Debug)]
pub struct UserCatalog {
    tables: Mutex<HashMap<String, Arc<UserTable>>>,
    next_oid: AtomicU32,
}

/// The first OID a user table gets (past pgbench's fixed relations, 16384..16391).
pub const FIRST_USER_OID: u32 = 20000;

impl Default for UserCatalog {
    fn default() -> Self {
        UserCatalog { tables: Mutex::new(HashMap::new()), next_oid: AtomicU32::new(FIRST_USER_OID) }
    }
}

impl UserCatalog {
    /// The table named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<UserTable>> {
        self.tables.lock().get(name).cloned()
    }

    /// A fresh OID (relations never reuse one within a run).
    pub(crate) fn new_oid(&self) -> Oid {
        Oid(self.next_oid.fetch_add(1, Ordering::Relaxed))
    }

    /// Adds `t`; false if the name is taken.
    pub(crate) fn insert(&self, t: Arc<UserTable>) -> bool {
        let mut m = self.tables.lock();
        if m.contains_key(&t.def.name) {
            return false;
        }
        m.insert(t.def.name.clone(), t);
        true
    }

    /// Removes the table named `name`.
    pub(crate) fn remove(&self, name: &str) -> Option<Arc<UserTable>> {
        self.tables.lock().remove(name)
    }
}

/// Encodes `values` (one per column, already checked against the types) as the tuple's
/// integer slots and its filler (null bitmap, then text bytes).
pub(crate) fn encode_row(def: &TableDef, values: &[Value]) -> (Vec<i64>, Vec<u8>) {
    let mut slots = Vec::with_capacity(values.len());
    let mut nulls = 0u64;
    let mut text = Vec::new();
    for (i, v) in values.iter().enumerate() {
        match v {
            Value::Null => {
                nulls |= 1 << i;
                slots.push(0);
            }
            Value::Int(x) => slots.push(*x),
            Value::Text(s) => {
                slots.push(s.len() as i64);
                text.extend_from_slice(s.as_bytes());
            }
        }
    }
    debug_assert_eq!(values.len(), def.columns.len());
    let mut filler = nulls.to_le_bytes().to_vec();
    filler.extend_from_slice(&text);
    (slots, filler)
}

/// Decodes a tuple of table `def` written by [`encode_row`].
///
/// # Errors
/// [`CorruptRow::NotARow`] when the tuple is not such a row (a damaged page).
pub(crate) fn decode_row(def: &TableDef, t: &[u8]) -> Result<Vec<Value>, CorruptRow> {
    let n = def.columns.len();
    let base = HEAP_TUPLE_HEADER_SIZE + 8 * n;
    let bad = || CorruptRow::NotARow { len: t.len(), table: def.name.clone() };
    let natts = t.get(26..28).map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    if natts != Some(n) || t.len() < base + 8 {
        return Err(bad());
    }
    let nulls =
        u64::from_le_bytes(t[base..base + 8].try_into().expect("an 8-byte range converts to [u8; 8]"));
    let mut at = base + 8;
    let mut out = Vec::with_capacity(n);
    for (i, c) in def.columns.iter().enumerate() {
        let s = HEAP_TUPLE_HEADER_SIZE + 8 * i;
        let slot = i64::from_le_bytes(t[s..s + 8].try_into().expect("an 8-byte range converts to [u8; 8]"));
        if nulls & (1 << i) != 0 {
            out.push(Value::Null);
            continue;
        }
        out.push(match c.ty {
            ColumnType::Int4 | ColumnType::Int8 | ColumnType::Numeric => Value::Int(slot),
            ColumnType::Text => {
                let len = usize::try_from(slot).map_err(|_| bad())?;
                let bytes = t.get(at..at + len).ok_or_else(bad)?;
                at += len;
                Value::Text(String::from_utf8(bytes.to_vec()).map_err(|_| bad())?)
            }
        });
    }
    Ok(out)
}

/// The B-tree key of a primary-key value: an integer is its own key; a text value's key is
/// a 64-bit FNV-1a hash of its bytes, so equal texts share a key and the unique check
/// compares the stored values of every entry under it (distinct texts may share a key too).
/// `None` for NULL, which a key column never holds.
pub fn index_key(v: &Value) -> Option<i64> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(*i),
        Value::Text(s) => {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in s.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            Some(h as i64)
        }
    }
}

/// Checks and converts `v` for column `c` (of table `table`): integer range, NOT NULL,
/// string to a text column, as PostgreSQL's input functions and constraint checks do.
///
/// # Errors
/// A [`CoerceError`], displayed as PostgreSQL's message.
pub fn coerce(table: &str, c: &ColumnDef, v: Value) -> Result<Value, CoerceError> {
    match (c.ty, v) {
        (_, Value::Null) if c.not_null => {
            Err(CoerceError::NotNull { column: c.name.clone(), table: table.to_string() })
        }
        (_, Value::Null) => Ok(Value::Null),
        (ColumnType::Int4, Value::Int(i)) if i32::try_from(i).is_err() => Err(CoerceError::IntegerOutOfRange),
        (ColumnType::Int4 | ColumnType::Int8 | ColumnType::Numeric, Value::Int(i)) => Ok(Value::Int(i)),
        (ColumnType::Int4 | ColumnType::Int8 | ColumnType::Numeric, Value::Text(s)) => {
            let type_name = match c.ty {
                ColumnType::Int4 => "integer",
                ColumnType::Int8 => "bigint",
                _ => "numeric",
            };
            let Ok(i) = s.trim().parse::<i64>() else {
                return Err(CoerceError::InvalidInput { type_name, input: s });
            };
            coerce(table, c, Value::Int(i))
        }
        (ColumnType::Text, Value::Text(s)) => Ok(Value::Text(s)),
        (ColumnType::Text, Value::Int(i)) => Ok(Value::Text(i.to_string())),
    }
}

/// Why [`coerce`] refused a value for a column; displays as PostgreSQL's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoerceError {
    /// NULL for a NOT NULL column.
    #[error("null value in column \"{column}\" of relation \"{table}\" violates not-null constraint")]
    NotNull {
        /// The column.
        column: String,
        /// The table.
        table: String,
    },
    /// An integer outside an int4 column's 32 bits.
    #[error("integer out of range")]
    IntegerOutOfRange,
    /// A string that is not an integer, for an integer column (`type_name`: `integer`,
    /// `bigint`, `numeric`).
    #[error("invalid input syntax for type {type_name}: \"{input}\"")]
    InvalidInput {
        /// PostgreSQL's name of the column's type.
        type_name: &'static str,
        /// The string, as given.
        input: String,
    },
}

/// For callers that carry SQL errors as text: the message, as displayed.
impl From<CoerceError> for String {
    fn from(e: CoerceError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::tuple::form_tuple;
    use lockstack_common::TransactionId;

    fn def() -> TableDef {
        let col = |name: &str, ty| ColumnDef {
            name: name.into(),
            ty,
            default: None,
            serial: false,
            not_null: false,
        };
        TableDef {
            name: "t".into(),
            columns: vec![col("a", ColumnType::Int4), col("b", ColumnType::Text), col("c", ColumnType::Text)],
            primary_key: Some(0),
        }
    }

    #[test]
    fn rows_round_trip_through_a_tuple() {
        let d = def();
        let vals = vec![Value::Int(-7), Value::Text("héllo".into()), Value::Null];
        let (slots, filler) = encode_row(&d, &vals);
        let mut t = form_tuple(TransactionId(3), 0, &slots, filler.len(), 0);
        let at = t.len() - filler.len();
        t[at..].copy_from_slice(&filler);
        assert_eq!(decode_row(&d, &t).unwrap(), vals);
        assert!(decode_row(&d, &t[..t.len() - 2]).is_err(), "a cut tuple is refused");
    }

    #[test]
    fn coercion_follows_the_column_types() {
        let d = def();
        assert_eq!(
            coerce("t", &d.columns[0], Value::Int(1 << 40)).unwrap_err().to_string(),
            "integer out of range"
        );
        assert_eq!(coerce("t", &d.columns[0], Value::Text("12".into())).unwrap(), Value::Int(12));
        let mut nn = d.columns[1].clone();
        nn.not_null = true;
        assert!(
            coerce("t", &nn, Value::Null).unwrap_err().to_string().contains("violates not-null constraint")
        );
        assert_eq!(Value::Null.sort_cmp(&Value::Int(1)), std::cmp::Ordering::Greater);
    }
}
