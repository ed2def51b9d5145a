//! The `#[test]` functions a backend's [`store_conformance!`](crate::store_conformance)
//! expands to, one per case.

/// One `#[test]` per case named, each calling the case in `[$module]` (a path) on a store
/// from `$open`.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($open:expr; $module:tt; $($case:ident),* $(,)?) => {
        $(
            $crate::conformance::harness::__conformance_tests!(@one $module, $case, $open);
        )*
    };
    (@one [$($module:tt)*], $case:ident, $open:expr) => {
        #[test]
        fn $case() {
            let Some((_keep, store)) = ($open)() else {
                return;
            };
            $($module)*::$case(&*store);
        }
    };
}

#[doc(hidden)]
pub use __conformance_tests;
