//! Heap tuples and their visibility.

pub mod visibility;
