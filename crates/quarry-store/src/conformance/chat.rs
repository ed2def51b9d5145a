//! Conformance cases for conversations and messages (`ChatStore`). Each case is a `pub fn chat_…(store: &dyn Store)`
//! listed in the macro below.

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_chat {
    ($open:expr) => {
        $crate::store_conformance!(@in chat, $open;);
    };
}
