//! The `--clients` list of client counts, one grammar for every command that sweeps over
//! client counts (`lockstack experiment`, `lockstack machine sweep`). Locks: none.
//!
//! Grammar: `COUNT ("," COUNT)*`, each `COUNT` a decimal number from 1 to
//! [`MAX_CLIENTS`], with white space around it ignored: `1,2,4,8` or `8, 1, 4`. The counts
//! come back sorted ascending with repeats dropped (a sweep measures each count once).

use lockstack_workloads::experiments::driver::MAX_CLIENTS;

/// Why a `--clients` list was refused: one line naming `--clients`, the bad item and, where it
/// helps, the whole list.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ClientsError {
    /// Two commas with nothing between them, a leading or trailing comma, or an empty list.
    #[error("--clients: empty item in \"{list}\"")]
    EmptyItem {
        /// The whole list as given.
        list: String,
    },
    /// An item that is not a whole number.
    #[error("--clients: invalid count \"{item}\" in \"{list}\"")]
    NotACount {
        /// The bad item, trimmed.
        item: String,
        /// The whole list as given.
        list: String,
    },
    /// A count of 0 or above [`MAX_CLIENTS`].
    #[error("--clients: {count} is outside 1 to {MAX_CLIENTS}")]
    OutOfRange {
        /// The count given.
        count: usize,
    },
}

impl From<ClientsError> for crate::Failure {
    /// Bad input: exit code 1.
    fn from(e: ClientsError) -> Self {
        crate::Failure::input(e.to_string())
    }
}

/// Parses a `--clients` list (the grammar is in the module's header).
///
/// # Errors
/// [`ClientsError`] for the first bad item: an empty one, one that is not a whole number, or a
/// count outside 1 to [`MAX_CLIENTS`].
pub(crate) fn parse_clients(list: &str) -> Result<Vec<usize>, ClientsError> {
    let mut counts = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(ClientsError::EmptyItem { list: list.to_string() });
        }
        let count: usize = item
            .parse()
            .map_err(|_| ClientsError::NotACount { item: item.to_string(), list: list.to_string() })?;
        if !(1..=MAX_CLIENTS).contains(&count) {
            return Err(ClientsError::OutOfRange { count });
        }
        counts.push(count);
    }
    counts.sort_unstable();
    counts.dedup();
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_both_former_syntaxes() {
        // `experiment --clients`: any order, spaces, repeats.
        assert_eq!(parse_clients("8, 1,4 ,1").unwrap(), vec![1, 4, 8]);
        // `machine sweep --clients`: ascending, no repeats, up to MAX_CLIENTS.
        assert_eq!(parse_clients("1,2,4,8,1000").unwrap(), vec![1, 2, 4, 8, MAX_CLIENTS]);
        assert_eq!(parse_clients("16").unwrap(), vec![16]);
    }

    #[test]
    fn refuses_bad_items_in_one_line_naming_the_argument_and_item() {
        let cases = [
            ("1,x", "--clients: invalid count \"x\" in \"1,x\""),
            ("1,-2", "--clients: invalid count \"-2\" in \"1,-2\""),
            ("2.5", "--clients: invalid count \"2.5\" in \"2.5\""),
            ("1,,2", "--clients: empty item in \"1,,2\""),
            ("", "--clients: empty item in \"\""),
            ("4,", "--clients: empty item in \"4,\""),
            ("0", "--clients: 0 is outside 1 to 1000"),
            ("1,1001", "--clients: 1001 is outside 1 to 1000"),
        ];
        for (list, message) in cases {
            let e = parse_clients(list).unwrap_err().to_string();
            assert_eq!(e, message, "{list:?}");
            assert!(!e.contains('\n'));
        }
    }
}
