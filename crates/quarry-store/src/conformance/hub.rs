//! Conformance cases for the tool hub's registry (`HubStore`). Each case is a `pub fn hub_…(store: &dyn Store)`
//! listed in the macro below.

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_hub {
    ($open:expr) => {
        $crate::store_conformance!(@in hub, $open;);
    };
}
