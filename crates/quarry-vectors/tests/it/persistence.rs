//! save/open round trips and every way `open` must refuse a file.

use std::path::{Path, PathBuf};

use crate::common::{XorShift, random_unit};
use quarry_vectors::{Quantization, VectorError, VectorIndex, VectorIndexOptions};

const DIMS: usize = 32;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("qv-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        TempDir(dir)
    }
    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn filled(n: u64, options: VectorIndexOptions) -> (VectorIndex, Vec<Vec<f32>>) {
    let index = VectorIndex::create(options).expect("create");
    let mut rng = XorShift::new(5);
    for key in 0..n {
        index.add(key, &random_unit(&mut rng, DIMS)).expect("add");
    }
    let queries = (0..20).map(|_| random_unit(&mut rng, DIMS)).collect();
    (index, queries)
}

fn saved_index(dir: &TempDir) -> (PathBuf, Vec<Vec<f32>>) {
    let (index, queries) = filled(2_000, VectorIndexOptions::new(DIMS));
    let path = dir.path("vectors.qv");
    index.save(&path).expect("save");
    (path, queries)
}

fn expect_corrupt(path: &Path) -> String {
    match VectorIndex::open(path, VectorIndexOptions::new(DIMS)) {
        Err(e @ VectorError::Corrupt { .. }) => {
            assert!(e.needs_rebuild());
            e.to_string()
        }
        Err(other) => panic!("expected Corrupt, got {other:?}"),
        Ok(_) => panic!("expected Corrupt, the file opened"),
    }
}

#[test]
fn round_trip_gives_identical_results() {
    let dir = TempDir::new("roundtrip");
    for quantization in [Quantization::F32, Quantization::I8] {
        let options = VectorIndexOptions {
            quantization,
            ..VectorIndexOptions::new(DIMS)
        };
        let (index, queries) = filled(3_000, options.clone());
        assert!(index.remove(17).expect("remove"));
        let path = dir.path(&format!("{quantization:?}.qv"));
        index.save(&path).expect("save");
        assert!(
            !dir.path(&format!("{quantization:?}.qv.tmp")).exists(),
            "tmp left behind"
        );

        let reopened = VectorIndex::open(&path, options).expect("open");
        assert_eq!(reopened.len(), index.len());
        assert_eq!(reopened.len(), 2_999);
        assert_eq!(reopened.dimensions(), DIMS);
        assert!(!reopened.contains(17));
        let keep = |k: u64| k.is_multiple_of(3);
        for q in &queries {
            assert_eq!(
                index.search(q, 10, None).expect("search"),
                reopened.search(q, 10, None).expect("search")
            );
            assert_eq!(
                index.search(q, 10, Some(&keep)).expect("search"),
                reopened.search(q, 10, Some(&keep)).expect("search")
            );
        }
        // The reopened index keeps working: adds (reusing the freed slot), growth, saves.
        let mut rng = XorShift::new(99);
        for key in 10_000..12_000 {
            reopened
                .add(key, &random_unit(&mut rng, DIMS))
                .expect("add after open");
        }
        assert_eq!(reopened.len(), 4_999);
        reopened.save(&path).expect("save again");
        assert_eq!(
            VectorIndex::open(
                &path,
                VectorIndexOptions {
                    quantization,
                    ..VectorIndexOptions::new(DIMS)
                }
            )
            .expect("open again")
            .len(),
            4_999
        );
    }
}

#[test]
fn empty_index_round_trips() {
    let dir = TempDir::new("empty");
    let path = dir.path("empty.qv");
    VectorIndex::create(VectorIndexOptions::new(DIMS))
        .expect("create")
        .save(&path)
        .expect("save");
    let index = VectorIndex::open(&path, VectorIndexOptions::new(DIMS)).expect("open");
    assert!(index.is_empty());
    assert!(
        index
            .search(&[0.5; DIMS], 5, None)
            .expect("search")
            .is_empty()
    );
    index.add(1, &[0.5; DIMS]).expect("add");
    assert_eq!(index.search(&[0.5; DIMS], 5, None).expect("search")[0].0, 1);
}

#[test]
fn open_with_wrong_dimensions_is_a_clear_error() {
    let dir = TempDir::new("dims");
    let (path, _) = saved_index(&dir);
    let err = VectorIndex::open(&path, VectorIndexOptions::new(DIMS * 2)).expect_err("must fail");
    match &err {
        VectorError::IndexDimensionMismatch {
            expected, found, ..
        } => {
            assert_eq!((*expected, *found), (DIMS * 2, DIMS));
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert!(err.needs_rebuild());
    let msg = err.to_string();
    assert!(
        msg.contains("32-dimensional") && msg.contains("64 dimensions") && msg.contains("rebuild"),
        "{msg}"
    );
    eprintln!("wrong dimensions: {msg}");
}

#[test]
fn open_with_wrong_quantization_is_a_clear_error() {
    let dir = TempDir::new("quant");
    let (path, _) = saved_index(&dir);
    let options = VectorIndexOptions {
        quantization: Quantization::I8,
        ..VectorIndexOptions::new(DIMS)
    };
    let err = VectorIndex::open(&path, options).expect_err("must fail");
    assert!(
        matches!(&err, VectorError::IndexConfigMismatch { setting: "quantization", expected, found, .. }
            if expected == "I8" && found == "F32"),
        "{err:?}"
    );
    assert!(err.needs_rebuild());
    eprintln!("wrong quantization: {err}");
}

#[test]
fn open_missing_file_is_not_found() {
    let dir = TempDir::new("missing");
    let err = VectorIndex::open(&dir.path("nope.qv"), VectorIndexOptions::new(DIMS))
        .expect_err("must fail");
    assert!(err.is_not_found(), "{err:?}");
    assert!(!err.needs_rebuild());
}

#[test]
fn truncated_files_are_rejected_without_panicking() {
    let dir = TempDir::new("truncated");
    let (path, _) = saved_index(&dir);
    let bytes = std::fs::read(&path).expect("read");
    let bad = dir.path("bad.qv");
    for cut in [
        0,
        1,
        8,
        47,
        48,
        100,
        bytes.len() / 2,
        bytes.len() - 49,
        bytes.len() - 48,
        bytes.len() - 1,
    ] {
        std::fs::write(&bad, &bytes[..cut]).expect("write");
        let msg = expect_corrupt(&bad);
        if cut == bytes.len() / 2 {
            eprintln!("truncated to {cut}: {msg}");
        }
    }
}

#[test]
fn damaged_files_are_rejected() {
    let dir = TempDir::new("damaged");
    let (path, _) = saved_index(&dir);
    let bytes = std::fs::read(&path).expect("read");
    let bad = dir.path("bad.qv");
    // A flipped bit anywhere (vectors, usearch header, graph, trailer fields) is caught.
    for at in [
        0,
        3,
        9,
        bytes.len() / 3,
        bytes.len() / 2,
        bytes.len() - 60,
        bytes.len() - 40,
        bytes.len() - 20,
    ] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        std::fs::write(&bad, &damaged).expect("write");
        let msg = expect_corrupt(&bad);
        if at == bytes.len() / 2 {
            eprintln!("bit flip at {at}: {msg}");
        }
    }
    // Extra bytes after the trailer.
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0u8; 16]);
    std::fs::write(&bad, &longer).expect("write");
    expect_corrupt(&bad);
    // Garbage of the right size.
    std::fs::write(&bad, vec![0x5Au8; bytes.len()]).expect("write");
    expect_corrupt(&bad);
}

#[test]
fn plain_usearch_file_is_rejected() {
    // A file usearch wrote directly has no trailer: refuse rather than guess.
    let dir = TempDir::new("plain");
    let raw = dir.path("raw.usearch");
    let options = usearch::IndexOptions {
        dimensions: DIMS,
        metric: usearch::MetricKind::IP,
        quantization: usearch::ScalarKind::F32,
        ..Default::default()
    };
    let index = usearch::Index::new(&options).expect("usearch");
    index.reserve(10).expect("reserve");
    index.add(1, &[0.5f32; DIMS]).expect("add");
    index.save(raw.to_str().expect("utf8")).expect("save");
    let msg = expect_corrupt(&raw);
    assert!(msg.contains("trailer"), "{msg}");
}

#[test]
fn saved_file_stays_loadable_by_plain_usearch() {
    let dir = TempDir::new("compat");
    let (path, queries) = saved_index(&dir);
    let ours = VectorIndex::open(&path, VectorIndexOptions::new(DIMS)).expect("open");
    let raw = usearch::Index::restore(path.to_str().expect("utf8")).expect("usearch restore");
    assert_eq!(raw.size(), ours.len());
    let m = raw.search(&queries[0], 5).expect("search");
    let ours_keys: Vec<u64> = ours
        .search(&queries[0], 5, None)
        .expect("search")
        .iter()
        .map(|r| r.0)
        .collect();
    let mut raw_keys = m.keys.clone();
    raw_keys.sort_unstable();
    let mut sorted = ours_keys.clone();
    sorted.sort_unstable();
    assert_eq!(raw_keys, sorted);
}

#[test]
fn save_replaces_atomically_and_fails_cleanly() {
    let dir = TempDir::new("atomic");
    let (path, _) = saved_index(&dir);
    // Overwrite with a different index: the new content wins, no tmp remains.
    let (small, _) = filled(10, VectorIndexOptions::new(DIMS));
    small.save(&path).expect("save over");
    assert_eq!(
        VectorIndex::open(&path, VectorIndexOptions::new(DIMS))
            .expect("open")
            .len(),
        10
    );
    assert!(!dir.path("vectors.qv.tmp").exists());
    // Saving into a missing directory is an error, not a panic.
    let err = small
        .save(&dir.path("no/such/dir/x.qv"))
        .expect_err("must fail");
    eprintln!("save into missing dir: {err}");
}
