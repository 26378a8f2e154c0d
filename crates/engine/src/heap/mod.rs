//! Heap tuples and their visibility.

pub mod tuple;
pub mod visibility;
