//! The store conformance suite (`quarry_store::conformance`) on the embedded backend.

use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;

quarry_store::store_conformance!(|| {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("quarry.db")).expect("open");
    Some((dir, Box::new(store) as Box<dyn Store>))
});
