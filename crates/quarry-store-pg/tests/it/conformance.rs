//! The store conformance suite (`quarry_store::conformance`) on PostgreSQL, each case in a
//! database of its own (`CREATE DATABASE … TEMPLATE template1`, dropped afterwards), on the
//! server named by `QUARRY_TEST_DATABASE_URL` (`scripts/test-services start` provides one).
//! Without it the cases pass with a note, except under CI (`CI=true`), where they fail.

use crate::common::TestDatabase;
use quarry_core::CollectionKind;
use quarry_store::prelude::*;
use quarry_store_pg::PgStore;

quarry_store::store_conformance!(|| {
    let db = TestDatabase::create("quarry_t")?;
    let store = PgStore::connect(&db.url).expect("connect the store");
    Some((db, Box::new(store) as Box<dyn Store>))
});

#[test]
fn a_wrong_url_is_a_clear_error_without_the_password() {
    let err = PgStore::connect("postgres://someone:s3cret@127.0.0.1:1/nothing")
        .expect_err("nothing listens on port 1");
    let text = err.to_string();
    assert!(
        text.contains("cannot connect to PostgreSQL at someone@127.0.0.1:1/nothing"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    let err = PgStore::connect("postgres://a:b@host:notaport/x").expect_err("bad port");
    assert!(err.to_string().contains("invalid PostgreSQL URL"), "{err}");
    assert!(!err.to_string().contains(":b@"), "{err}");
}

#[test]
fn the_schema_is_applied_once_and_a_newer_database_is_refused() {
    let Some(db) = TestDatabase::create("quarry_t") else {
        return;
    };
    PgStore::connect(&db.url).expect("first start migrates");
    PgStore::connect(&db.url).expect("second start finds the schema current");
    db.client()
        .batch_execute("INSERT INTO quarry_schema (version, checksum) VALUES (99, 'x')")
        .expect("pretend a newer quarry migrated");
    let err = PgStore::connect(&db.url).expect_err("newer schema");
    assert!(err.to_string().contains("newer than this quarry"), "{err}");
}

/// The test database's URL with the query replaced by `query`.
fn with_query(url: &str, query: &str) -> String {
    let base = url.split_once('?').map_or(url, |(b, _)| b);
    format!("{base}?{query}")
}

/// The test server behind its TLS-only front (`QUARRY_TEST_PG_TLS_URL`, a certificate a CA
/// of its own signed, `QUARRY_TEST_PG_CA`): trusted through `sslrootcert`, the store connects
/// and works over TLS; with the public roots, or another CA, `sslmode=require` refuses the
/// server, saying why; and a server without TLS is refused under `sslmode=require`.
#[test]
fn tls_with_a_private_ca_through_sslrootcert() {
    let Some(db) = TestDatabase::create("quarry_t") else {
        return;
    };
    let (Ok(front), Ok(ca)) = (
        std::env::var("QUARRY_TEST_PG_TLS_URL"),
        std::env::var("QUARRY_TEST_PG_CA"),
    ) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "QUARRY_TEST_PG_TLS_URL / QUARRY_TEST_PG_CA are not set (scripts/test-services start exports them)"
        );
        eprintln!("skipped: QUARRY_TEST_PG_TLS_URL is not set");
        return;
    };
    let front = crate::common::with_database(&front, db.name());
    let store = PgStore::connect(&with_query(
        &front,
        &format!("sslmode=require&sslrootcert={ca}"),
    ))
    .expect("connect over TLS with the test CA");
    store
        .create_collection("default", "c", CollectionKind::Folder, "/tmp", "**/*.md")
        .expect("a write over TLS");
    drop(store);
    // The default (`prefer`) takes TLS when offered, so it must check the certificate too.
    let err = PgStore::connect(&front).expect_err("the public roots do not know the test CA");
    assert!(
        err.to_string().contains("cannot connect to PostgreSQL"),
        "{err}"
    );
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
    // Another CA.
    let other = tempfile::NamedTempFile::new().expect("a temp file");
    std::fs::write(other.path(), OTHER_CA).expect("write");
    let err = PgStore::connect(&with_query(
        &front,
        &format!("sslmode=require&sslrootcert={}", other.path().display()),
    ))
    .expect_err("another CA");
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
    // The front speaks TLS only: a plain connection through it fails.
    PgStore::connect(&with_query(&front, "sslmode=disable")).expect_err("TLS only");
    // A server without TLS under sslmode=require.
    let err = PgStore::connect(&with_query(&db.url, "sslmode=require"))
        .expect_err("the server itself has no TLS");
    assert!(
        err.to_string().contains("cannot connect to PostgreSQL"),
        "{err}"
    );
}

/// A CA that signed nothing here (made once with openssl; it never signs anything).
const OTHER_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBnjCCAUOgAwIBAgIUPludlEe8dXpAJEftNn/u8kGsDlswCgYIKoZIzj0EAwIw
IzEhMB8GA1UEAwwYcXVhcnJ5IHVucmVsYXRlZCB0ZXN0IENBMCAXDTI2MTEyNzE4
NDkxMFoYDzIxMjYxMTAzMTg0OTEwWjAjMSEwHwYDVQQDDBhxdWFycnkgdW5yZWxh
dGVkIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATFp+nFeH5gKZcP
5AxdniEY3XzWCCzn4mzzdzl5uogNnzUxyrlF4RtixbdcSHopWlGsRyCZ2btpDCS1
iDHi36XRo1MwUTAdBgNVHQ4EFgQU+ZKWwmnJbqF0Ad1XRzi0cLYwM5QwHwYDVR0j
BBgwFoAU+ZKWwmnJbqF0Ad1XRzi0cLYwM5QwDwYDVR0TAQH/BAUwAwEB/zAKBggq
hkjOPQQDAgNJADBGAiEA3KWcQ09uKlQiyk7pyrJZTQ8MwSTtPgZc68BAd1uv/HgC
IQDkMJGkdWhvmbxMirJnR5MXC1eiCIF2I8UOi5ZYyfukEg==
-----END CERTIFICATE-----
";
