//! Conformance cases for spaces, users, memberships and access tokens (`AccessStore`). Each case is a `pub fn access_…(store: &dyn Store)`
//! listed in the macro below.

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_access {
    ($open:expr) => {
        $crate::store_conformance!(@in access, $open;);
    };
}
