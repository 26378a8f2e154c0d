//! Atomics and fences: `#[repr(transparent)]` wrappers over `std::sync::atomic` (or loom's under
//! `--cfg loom`) with the std method set, each method `#[inline]` and `#[track_caller]` so that
//! an installed [`hook`](super::hook) sees the address, size, access kind and the crate's
//! source line of every operation.
//!
//! [`plain`] re-exports the std types for the few atomics that deliberately stay outside the
//! model (owner-only counters, bulk page words charged by `touch` at the lock level); each use
//! names its reason where it is declared.

pub use std::sync::atomic::Ordering;

#[cfg(not(loom))]
use super::hook::{self, Access};

/// `std::sync::atomic`'s types, unhooked and never loom-modelled: for per-backend counters
/// written only by their owner, padding fields that only give a struct PostgreSQL's size, and
/// bulk data words (CLOG page bytes) whose accesses a loom model could not track and that the
/// simulated machine charges through [`touch`](super::hook::touch) under their lock.
pub mod plain {
    pub use std::sync::atomic::{
        AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize,
        Ordering,
    };
}

#[cfg(not(loom))]
use std::sync::atomic as imp;

#[cfg(loom)]
use loom::sync::atomic as imp;

macro_rules! report {
    ($self:ident, $size:expr, $acc:ident) => {
        #[cfg(not(loom))]
        hook::atomic($self as *const Self as usize, $size, Access::$acc);
    };
}

macro_rules! common_methods {
    ($name:ident, $t:ty, $size:expr) => {
        /// Loads the value (`std`'s `load`).
        #[inline]
        #[track_caller]
        pub fn load(&self, order: Ordering) -> $t {
            report!(self, $size, Read);
            self.0.load(order)
        }

        /// Stores `v` (`std`'s `store`).
        #[inline]
        #[track_caller]
        pub fn store(&self, v: $t, order: Ordering) {
            report!(self, $size, Write);
            self.0.store(v, order)
        }

        /// Stores `v` and returns the previous value.
        #[inline]
        #[track_caller]
        pub fn swap(&self, v: $t, order: Ordering) -> $t {
            report!(self, $size, Rmw);
            self.0.swap(v, order)
        }

        /// Stores `new` if the value is `current`; `Ok(previous)` on success, `Err(actual)`
        /// otherwise.
        #[inline]
        #[track_caller]
        pub fn compare_exchange(
            &self,
            current: $t,
            new: $t,
            success: Ordering,
            failure: Ordering,
        ) -> Result<$t, $t> {
            report!(self, $size, Rmw);
            self.0.compare_exchange(current, new, success, failure)
        }

        /// As [`compare_exchange`](Self::compare_exchange), but may fail spuriously.
        #[inline]
        #[track_caller]
        pub fn compare_exchange_weak(
            &self,
            current: $t,
            new: $t,
            success: Ordering,
            failure: Ordering,
        ) -> Result<$t, $t> {
            report!(self, $size, Rmw);
            self.0.compare_exchange_weak(current, new, success, failure)
        }

        /// Applies `f` in a compare-exchange loop (one reported RMW per attempt).
        #[inline]
        #[track_caller]
        pub fn fetch_update<F: FnMut($t) -> Option<$t>>(
            &self,
            set_order: Ordering,
            fetch_order: Ordering,
            mut f: F,
        ) -> Result<$t, $t> {
            let mut prev = self.load(fetch_order);
            while let Some(next) = f(prev) {
                match self.compare_exchange_weak(prev, next, set_order, fetch_order) {
                    Ok(x) => return Ok(x),
                    Err(actual) => prev = actual,
                }
            }
            Err(prev)
        }

        /// Consumes the atomic and returns the value.
        #[inline]
        pub fn into_inner(self) -> $t {
            self.0.into_inner()
        }
    };
}

macro_rules! std_only_methods {
    ($t:ty) => {
        /// The value through an exclusive reference (no other thread can see it).
        #[cfg(not(loom))]
        #[inline]
        pub fn get_mut(&mut self) -> &mut $t {
            self.0.get_mut()
        }
    };
}

/// Read-modify-write methods that take a value and return the previous one (`fetch_add`,
/// `fetch_or`, ...), each reported as one RMW of the whole atomic.
macro_rules! rmw_methods {
    ($t:ty, $size:expr; $($(#[doc = $doc:literal])* $method:ident),* $(,)?) => {
        $(
            $(#[doc = $doc])*
            #[inline]
            #[track_caller]
            pub fn $method(&self, v: $t, order: Ordering) -> $t {
                report!(self, $size, Rmw);
                self.0.$method(v, order)
            }
        )*
    };
}

macro_rules! atomic_int {
    ($name:ident, $t:ty) => {
        #[doc = concat!("`std::sync::atomic::", stringify!($name), "` through the facade (loom's under `--cfg loom`).")]
        #[repr(transparent)]
        #[derive(Default)]
        pub struct $name(imp::$name);

        impl $name {
            /// A new atomic holding `v` (`const` in production; loom's constructor is not).
            #[cfg(not(loom))]
            #[inline]
            pub const fn new(v: $t) -> $name {
                $name(imp::$name::new(v))
            }

            /// A new atomic holding `v`.
            #[cfg(loom)]
            #[inline]
            pub fn new(v: $t) -> $name {
                $name(imp::$name::new(v))
            }

            common_methods!($name, $t, std::mem::size_of::<$t>());
            std_only_methods!($t);

            rmw_methods!($t, std::mem::size_of::<$t>();
                /// Adds `v` (wrapping) and returns the previous value.
                fetch_add,
                /// Subtracts `v` (wrapping) and returns the previous value.
                fetch_sub,
                /// Bitwise and with `v`; returns the previous value.
                fetch_and,
                /// Bitwise or with `v`; returns the previous value.
                fetch_or,
                /// Bitwise xor with `v`; returns the previous value.
                fetch_xor,
                /// Stores the maximum of the value and `v`; returns the previous value.
                fetch_max,
                /// Stores the minimum of the value and `v`; returns the previous value.
                fetch_min,
            );
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.0, f)
            }
        }

        impl From<$t> for $name {
            fn from(v: $t) -> $name {
                $name::new(v)
            }
        }
    };
}

atomic_int!(AtomicU8, u8);
atomic_int!(AtomicU16, u16);
atomic_int!(AtomicU32, u32);
atomic_int!(AtomicI32, i32);
atomic_int!(AtomicU64, u64);
atomic_int!(AtomicI64, i64);
atomic_int!(AtomicUsize, usize);

/// `std::sync::atomic::AtomicBool` through the facade (loom's under `--cfg loom`).
#[repr(transparent)]
#[derive(Default)]
pub struct AtomicBool(imp::AtomicBool);

impl AtomicBool {
    /// A new atomic holding `v` (`const` in production).
    #[cfg(not(loom))]
    #[inline]
    pub const fn new(v: bool) -> AtomicBool {
        AtomicBool(imp::AtomicBool::new(v))
    }

    /// A new atomic holding `v`.
    #[cfg(loom)]
    #[inline]
    pub fn new(v: bool) -> AtomicBool {
        AtomicBool(imp::AtomicBool::new(v))
    }

    common_methods!(AtomicBool, bool, 1);
    std_only_methods!(bool);

    rmw_methods!(bool, 1;
        /// Logical and with `v`; returns the previous value.
        fetch_and,
        /// Logical or with `v`; returns the previous value.
        fetch_or,
        /// Logical xor with `v`; returns the previous value.
        fetch_xor,
    );
}

impl std::fmt::Debug for AtomicBool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl From<bool> for AtomicBool {
    fn from(v: bool) -> AtomicBool {
        AtomicBool::new(v)
    }
}

/// `std::sync::atomic::AtomicPtr` through the facade (loom's under `--cfg loom`).
#[repr(transparent)]
pub struct AtomicPtr<T>(imp::AtomicPtr<T>);

impl<T> AtomicPtr<T> {
    /// A new atomic holding `p` (`const` in production).
    #[cfg(not(loom))]
    #[inline]
    pub const fn new(p: *mut T) -> AtomicPtr<T> {
        AtomicPtr(imp::AtomicPtr::new(p))
    }

    /// A new atomic holding `p`.
    #[cfg(loom)]
    #[inline]
    pub fn new(p: *mut T) -> AtomicPtr<T> {
        AtomicPtr(imp::AtomicPtr::new(p))
    }

    common_methods!(AtomicPtr, *mut T, std::mem::size_of::<usize>());
    std_only_methods!(*mut T);
}

impl<T> Default for AtomicPtr<T> {
    fn default() -> AtomicPtr<T> {
        AtomicPtr::new(std::ptr::null_mut())
    }
}

impl<T> std::fmt::Debug for AtomicPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

/// A memory fence (`std::sync::atomic::fence`, loom's under `--cfg loom`).
#[inline]
#[track_caller]
pub fn fence(order: Ordering) {
    #[cfg(not(loom))]
    hook::fence(std::panic::Location::caller());
    imp::fence(order)
}
