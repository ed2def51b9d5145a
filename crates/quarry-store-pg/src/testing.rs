//! Test databases (feature `testing`): a fresh database per test on the server `QUARRY_TEST_DATABASE_URL` names
//! (`scripts/test-services start` provides one): made from `template1` (which has pgvector),
//! dropped when the test ends. Without the variable a test passes with a note, except under
//! CI (`CI=true`), where it fails.

use postgres::{Client, NoTls};

/// A database that lives as long as the test.
pub struct TestDatabase {
    admin_url: String,
    name: String,
    /// The URL of the new database (the server's URL with its name swapped, query kept).
    pub url: String,
}

impl TestDatabase {
    /// A new database named `PREFIX_<uuid>`; `None` (with a note) when no server is given.
    pub fn create(prefix: &str) -> Option<TestDatabase> {
        let Ok(admin_url) = std::env::var("QUARRY_TEST_DATABASE_URL") else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "QUARRY_TEST_DATABASE_URL is not set: CI runs the PostgreSQL tests \
                 (start a server with `eval \"$(bash scripts/test-services start)\"`)"
            );
            eprintln!("skipped: QUARRY_TEST_DATABASE_URL is not set");
            return None;
        };
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let mut admin = Client::connect(&admin_url, NoTls).expect("connect to the test server");
        admin
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE template1"))
            .expect("create a test database");
        let url = with_database(&admin_url, &name);
        Some(TestDatabase {
            admin_url,
            name,
            url,
        })
    }

    /// The new database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A plain client on the new database (for what the store does not expose).
    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).expect("connect to the test database")
    }
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

/// `url` naming database `name` instead, its query (`sslmode=…`) kept.
pub fn with_database(url: &str, name: &str) -> String {
    let (path, query) = match url.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (url, None),
    };
    let base = path.rsplit_once('/').map_or(path, |(b, _)| b);
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}
