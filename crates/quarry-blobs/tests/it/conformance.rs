//! The blob store conformance suite (`quarry_blobs::conformance`) on [`FsBlobStore`], each
//! case in a temporary directory of its own, and the whole suite on one store.

use quarry_blobs::{BlobStore, FsBlobStore};

quarry_blobs::blob_store_conformance!(|| {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = FsBlobStore::open(dir.path()).expect("open the store");
    Some((dir, Box::new(store) as Box<dyn BlobStore>))
});

#[test]
fn the_whole_suite_on_one_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = FsBlobStore::open(dir.path()).expect("open the store");
    quarry_blobs::conformance::blob_store_conformance(&store);
}
