//! How a page is searched for a key ([`Search`]): bisection over the line pointers, or
//! interpolation from the key range the parent gives ([`KeyRange`]) followed by a galloping
//! search.

use lockstack_bufmgr::page::{self, OffsetNumber};

use super::nbtpage::{nitems, pos_at};

/// What a page's parent says of the keys on it: every key is at least `low` (the downlink's
/// separator) and below `high` (the next separator), when the parent had one. A page that
/// split after the parent was read holds a prefix of that range, so the range can be wide but
/// never excludes a key the page holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyRange {
    pub(super) low: Option<i64>,
    pub(super) high: Option<i64>,
}

impl KeyRange {
    /// Nothing known (the root, or a page reached by a right-link).
    pub(super) const UNKNOWN: KeyRange = KeyRange { low: None, high: None };
}

/// How a page is searched for a key.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Search {
    /// Bisection over the line pointers (`_bt_binsrch`, PostgreSQL `nbtsearch.c`): about
    /// log2(items) probes, each a line pointer and the item it points to.
    Binary,
    /// Interpolation from the key range the parent gives (Graefe, "B-tree indexes,
    /// interpolation search, and skew", DaMoN 2006): a first probe where the key would sit if
    /// keys were spread evenly over the range, then a galloping (exponential) search from
    /// there, then bisection of what is left. Dense keys such as pgbench's are found in two
    /// probes; the galloping bounds the worst case at about twice bisection's probes. Used
    /// only where the range is known; otherwise the page is bisected.
    #[default]
    Interpolation,
}

/// A name [`Search`]'s parser does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown B-tree page search '{0}' (valid: interpolation, binary)")]
pub struct UnknownSearch(pub String);

impl std::str::FromStr for Search {
    type Err = UnknownSearch;

    /// Parses `interpolation` or `binary`.
    fn from_str(s: &str) -> Result<Search, UnknownSearch> {
        match s {
            "interpolation" => Ok(Search::Interpolation),
            "binary" => Ok(Search::Binary),
            _ => Err(UnknownSearch(s.to_string())),
        }
    }
}

impl std::fmt::Display for Search {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Search::Interpolation => "interpolation",
            Search::Binary => "binary",
        })
    }
}

/// The first offset in `lo..hi` for which `below` is false (`hi` if none), where `below` is
/// true on a prefix of the range: bisection, or galloping out from `guess` first.
#[inline]
pub(super) fn partition_point(lo: u16, hi: u16, guess: Option<u16>, below: impl Fn(u16) -> bool) -> u16 {
    let (mut lo, mut hi) = (lo, hi);
    if let Some(g) = guess
        && lo < hi
    {
        // Invariant from here on: every offset below `lo` is below, none from `hi` on is.
        let g = g.clamp(lo, hi - 1);
        let mut step = 1u16;
        if below(g) {
            lo = g + 1;
            while lo < hi {
                let j = lo.saturating_add(step - 1).min(hi - 1);
                if below(j) {
                    lo = j + 1;
                    step = step.saturating_mul(2);
                } else {
                    hi = j;
                    break;
                }
            }
        } else {
            hi = g;
            while lo < hi {
                let j = hi.saturating_sub(step).max(lo);
                if below(j) {
                    lo = j + 1;
                    break;
                }
                hi = j;
                step = step.saturating_mul(2);
            }
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Where `key` would sit among `slots` evenly spread slots covering `range`, as an offset from
/// `first`: None when the range is not fully known or `key` lies outside it.
#[inline]
pub(super) fn interpolate(range: KeyRange, key: i64, first: u16, slots: u16) -> Option<u16> {
    let (low, high) = (range.low?, range.high?);
    if key < low || key >= high {
        return None;
    }
    let span = i128::from(high) - i128::from(low);
    let at = (i128::from(key) - i128::from(low)) * i128::from(slots) / span;
    Some(first.saturating_add(u16::try_from(at).unwrap_or(u16::MAX)))
}

/// First offset whose item is >= `target` (n+1 if none), searched as `search` says with the
/// page's key range `range`.
#[inline]
pub(super) fn lower_bound_within(
    p: &[u8],
    target: (i64, u64),
    range: KeyRange,
    search: Search,
) -> OffsetNumber {
    let n = nitems(p);
    let guess = match search {
        Search::Binary => None,
        Search::Interpolation => interpolate(range, target.0, 1, n),
    };
    partition_point(1, n + 1, guess, |off| pos_at(p, off) < target)
}

/// The child to descend into for `target` on an internal page (the last item <= target, with
/// the first item counting as minus infinity), searched as `search` says with the page's key
/// range `range`; also returns the child's key range.
#[inline]
pub(super) fn find_child_within(
    p: &[u8],
    target: (i64, u64),
    range: KeyRange,
    search: Search,
) -> (u32, KeyRange) {
    let n = nitems(p);
    // Item 1 stands for the range's low end: the answer is the first item above the target.
    let guess = match search {
        Search::Binary => None,
        Search::Interpolation => interpolate(range, target.0, 2, n),
    };
    let at = partition_point(2, n + 1, guess, |off| pos_at(p, off) <= target);
    let b = page::item_data(p, at - 1);
    let child = u32::from_le_bytes(b[16..20].try_into().expect("a 4-byte range converts to [u8; 4]"));
    let low = if at > 2 { Some(pos_at(p, at - 1).0) } else { range.low };
    let high = if at <= n { Some(pos_at(p, at).0) } else { range.high };
    (child, KeyRange { low, high })
}
