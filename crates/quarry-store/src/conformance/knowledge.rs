//! Conformance cases for knowledge bases, their files, blobs, idempotency keys (`KnowledgeStore`) and the job queue (`JobQueue`). Each case is a `pub fn knowledge_…(store: &dyn Store)`
//! listed in the macro below.

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_knowledge {
    ($open:expr) => {
        $crate::store_conformance!(@in knowledge, $open;);
    };
}
