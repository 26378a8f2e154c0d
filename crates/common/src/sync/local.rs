//! Thread-locals that are per task under a simulation: [`LocalKey`], declared with the
//! facade's [`thread_local!`](crate::thread_local) macro (same syntax as `std`'s).
//!
//! Production: a `std::thread_local!` (const initialisers stay const), plus one predicted
//! branch per access. Loom: `loom::thread_local!`. Simulation: the backend's per-task storage,
//! so each simulated backend has its own waiter record, stats block and slots.

/// A thread-local (per-task under a simulation) value; see the module docs.
pub struct LocalKey<T: 'static> {
    #[cfg(not(loom))]
    inner: &'static std::thread::LocalKey<T>,
    #[cfg(loom)]
    inner: &'static loom::thread::LocalKey<T>,
    #[cfg(not(loom))]
    init: fn() -> T,
}

/// The value was already destroyed (the thread is exiting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessError;

impl std::fmt::Display for AccessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("thread-local value already destroyed")
    }
}

impl std::error::Error for AccessError {}

impl<T: 'static> std::fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalKey")
    }
}

impl<T: 'static> LocalKey<T> {
    /// Used by [`thread_local!`](crate::thread_local); not for direct use.
    #[doc(hidden)]
    #[cfg(not(loom))]
    pub const fn __new(inner: &'static std::thread::LocalKey<T>, init: fn() -> T) -> LocalKey<T> {
        LocalKey { inner, init }
    }

    /// Used by [`thread_local!`](crate::thread_local); not for direct use.
    #[doc(hidden)]
    #[cfg(loom)]
    pub const fn __new(inner: &'static loom::thread::LocalKey<T>) -> LocalKey<T> {
        LocalKey { inner }
    }

    /// Runs `f` on this thread's (task's) value, creating it on first use. Panics if the value
    /// was already destroyed, as `std` does.
    #[inline]
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let mut f = Some(f);
        match self
            .try_with(|v| (f.take().expect("f is taken once: try_with runs its closure at most once"))(v))
        {
            Ok(r) => r,
            Err(e) => panic!("cannot access a thread-local: {e}"),
        }
    }

    /// As [`with`](Self::with), but returns [`AccessError`] once the value was destroyed.
    #[inline]
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        #[cfg(not(loom))]
        {
            let mut f = Some(f);
            if let Some(r) = super::hook::with_current(|s| {
                let key = self as *const Self as usize;
                let init = self.init;
                let p = s.backend().task_local(key, &mut || Box::new(init()));
                // SAFETY: the backend keeps the task's value alive until the task ends (the
                // `task_local` contract), and the reference does not leave this call.
                let v = unsafe { &*p };
                (f.take().expect("f is taken once: with_current runs its closure at most once"))(
                    v.downcast_ref::<T>()
                        .expect("the key's value was made by its own init, so it has the key's type"),
                )
            }) {
                return Ok(r);
            }
            self.inner
                .try_with(
                    f.take()
                        .expect("f is still here: with_current returned None, so it did not run the closure"),
                )
                .map_err(|_| AccessError)
        }
        #[cfg(loom)]
        {
            self.inner.try_with(f).map_err(|_| AccessError)
        }
    }
}

impl<T: 'static> LocalKey<std::cell::Cell<T>> {
    /// The value (`Cell::get`).
    #[inline]
    pub fn get(&'static self) -> T
    where
        T: Copy,
    {
        self.with(|c| c.get())
    }

    /// Sets the value (`Cell::set`).
    #[inline]
    pub fn set(&'static self, v: T) {
        self.with(|c| c.set(v))
    }
}

/// Declares thread-locals through the facade, with `std::thread_local!`'s syntax (including
/// `const { ... }` initialisers). Each becomes a [`LocalKey`].
#[cfg(not(loom))]
#[macro_export]
macro_rules! thread_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }; $($rest:tt)*) => {
        $crate::thread_local!($(#[$attr])* $vis static $name: $t = const { $init });
        $crate::thread_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }) => {
        $(#[$attr])* $vis static $name: $crate::sync::local::LocalKey<$t> = {
            ::std::thread_local!(static INNER: $t = const { $init });
            fn __init() -> $t {
                $init
            }
            $crate::sync::local::LocalKey::__new(&INNER, __init)
        };
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::thread_local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::thread_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::sync::local::LocalKey<$t> = {
            ::std::thread_local!(static INNER: $t = $init);
            fn __init() -> $t {
                $init
            }
            $crate::sync::local::LocalKey::__new(&INNER, __init)
        };
    };
}

/// Declares thread-locals through the facade (loom's under `--cfg loom`).
#[cfg(loom)]
#[macro_export]
macro_rules! thread_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }; $($rest:tt)*) => {
        $crate::thread_local!($(#[$attr])* $vis static $name: $t = $init; $($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }) => {
        $crate::thread_local!($(#[$attr])* $vis static $name: $t = $init);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::thread_local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::thread_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::sync::local::LocalKey<$t> = {
            ::loom::thread_local!(static INNER: $t = $init);
            $crate::sync::local::LocalKey::__new(&INNER)
        };
    };
}
