//! Conformance cases for collections, documents, chunks, embeddings, settings and contexts (`Store`). Each case is a `pub fn store_…(store: &dyn Store)`
//! listed in the macro below.

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_store {
    ($open:expr) => {
        $crate::store_conformance!(@in store, $open;);
    };
}
