//! The store conformance suite (`quarry_store::conformance`) on PostgreSQL, each case in a
//! database of its own (`CREATE DATABASE … TEMPLATE template1`, dropped afterwards), on the
//! server named by `QUARRY_TEST_DATABASE_URL` (`scripts/test-services start` provides one).
//! Without it the cases pass with a note, except under CI (`CI=true`), where they fail.

use postgres::{Client, NoTls};
use quarry_store::Store;
use quarry_store_pg::PgStore;

/// A database that lives as long as the test.
struct TestDatabase {
    admin_url: String,
    name: String,
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.admin_url, NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A fresh database on the test server, and the URL to reach it.
fn test_database() -> Option<(TestDatabase, String)> {
    let Ok(url) = std::env::var("QUARRY_TEST_DATABASE_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "QUARRY_TEST_DATABASE_URL is not set: CI runs the PostgreSQL conformance suite \
             (start one with `eval \"$(bash scripts/test-services start)\"`)"
        );
        eprintln!("skipped: QUARRY_TEST_DATABASE_URL is not set");
        return None;
    };
    let name = format!("quarry_t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = Client::connect(&url, NoTls).expect("connect to the test server");
    admin
        .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE template1"))
        .expect("create a test database");
    let (base, _) = url.rsplit_once('/').expect("a database in the URL");
    let db_url = format!("{base}/{name}");
    Some((
        TestDatabase {
            admin_url: url,
            name,
        },
        db_url,
    ))
}

quarry_store::store_conformance!(|| {
    let (db, url) = test_database()?;
    let store = PgStore::connect(&url).expect("connect the store");
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
    let Some((_db, url)) = test_database() else {
        return;
    };
    PgStore::connect(&url).expect("first start migrates");
    PgStore::connect(&url).expect("second start finds the schema current");
    let mut c = Client::connect(&url, NoTls).expect("connect");
    c.batch_execute("INSERT INTO quarry_schema (version, checksum) VALUES (99, 'x')")
        .expect("pretend a newer quarry migrated");
    let err = PgStore::connect(&url).expect_err("newer schema");
    assert!(err.to_string().contains("newer than this quarry"), "{err}");
}
