//! A small pool of synchronous PostgreSQL connections, opened on demand and kept while
//! healthy. TLS is rustls (ring): `sslmode=prefer` (the default) encrypts when the server
//! offers it, `sslmode=require` insists, `sslmode=disable` never does. The server's
//! certificate is checked against the public web roots, or, with libpq's `sslrootcert=FILE`
//! in the URL, against the CA certificates of that PEM file only (a managed database's CA,
//! a private one); `sslrootcert=system` means the public roots.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use postgres::config::Host;
use postgres::types::ToSql;
use postgres::{Client, Config, Row, Statement};
use quarry_core::{Error, Result};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Connections per process unless configured otherwise.
pub(crate) const DEFAULT_SIZE: usize = 16;
/// How long a session may sit inside a transaction without a statement before PostgreSQL
/// ends it (unless the URL's `options` set `idle_in_transaction_session_timeout`). Quarry's
/// transactions run statement after statement; one that idles belongs to a node that froze
/// (SIGSTOP, a paused VM) and would otherwise hold its row and advisory locks — and every
/// other node waiting on them — until it wakes.
pub(crate) const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(30);
/// How PostgreSQL plans a kept statement (unless the URL's `options` set `plan_cache_mode`):
/// for the values bound each time, never once for any values. Kept statements save the
/// parse round trip, not the planning. A generic plan knows neither the model (so no
/// model's partial HNSW index can serve it) nor how much of the store a filter's collections
/// hold: after an `ANALYZE`, PostgreSQL switched a kept filter count to a sequential scan of
/// every document (51 ms against 5.5 for 4,097 of 110,000 chunks), and a 5 % vector search
/// over HTTP went from 28 to 70 ms at p50 (bench/backends/routes.py).
const PLAN_CACHE_MODE: &str = "force_custom_plan";
/// How long a caller waits for a free connection before giving up.
const CHECKOUT_WAIT: Duration = Duration::from_secs(30);
/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct Pool {
    connector: Connector,
    size: usize,
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    idle: Vec<(Client, Kept)>,
    open: usize,
}

/// A connection's prepared statements by their SQL text.
type Statements = std::collections::HashMap<String, Statement>;

/// What a pooled connection keeps between checkouts besides the session itself.
#[derive(Default)]
struct Kept {
    statements: Statements,
    /// The session settings last run through [`PgConnection::set_session`], once they
    /// succeeded.
    settings: Option<String>,
}

/// Statements kept per connection; past it the cache starts over (statements whose text
/// varies, such as a vector search's dimensions, must not grow it without bound).
const MAX_STATEMENTS: usize = 256;

impl Pool {
    /// A pool for `url`; nothing is opened yet. A malformed URL is an error that names the
    /// problem but never repeats the URL (it may hold a password).
    pub(crate) fn new(url: &str, size: usize) -> Result<Pool> {
        let (url, root_cert) = take_root_cert(url);
        let mut config: Config = url.parse().map_err(|e| {
            Error::InvalidInput(format!(
                "invalid PostgreSQL URL ({e}); expected postgres://user:password@host:port/database"
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("quarry");
        }
        let describe = describe(&config);
        Ok(Pool {
            connector: Connector {
                config,
                tls: tls(root_cert.as_deref())?,
                describe,
            },
            size: size.max(1),
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        })
    }

    /// `user@host:port/database`, for messages (never the password).
    pub(crate) fn describe(&self) -> String {
        self.connector.describe.clone()
    }

    /// What opens this pool's connections, for a thread that keeps one of its own.
    pub(crate) fn connector(&self) -> Connector {
        self.connector.clone()
    }

    /// A connection: an idle healthy one, else a new one while under the pool's size, else
    /// the next one returned (up to [`CHECKOUT_WAIT`]).
    pub(crate) fn get(&self) -> Result<PgConnection<'_>> {
        let mut state = self.lock();
        loop {
            while let Some((client, kept)) = state.idle.pop() {
                if !client.is_closed() {
                    return Ok(PgConnection {
                        client: Some(client),
                        kept,
                        pool: self,
                    });
                }
                state.open -= 1;
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return match self.connect_dedicated() {
                    Ok(client) => Ok(PgConnection {
                        client: Some(client),
                        kept: Kept::default(),
                        pool: self,
                    }),
                    Err(e) => {
                        self.lock().open -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let (next, timeout) = self
                .freed
                .wait_timeout(state, CHECKOUT_WAIT)
                .unwrap_or_else(|p| p.into_inner());
            state = next;
            if timeout.timed_out() && state.idle.is_empty() && state.open >= self.size {
                return Err(Error::StorageUnavailable(format!(
                    "all {} connections to PostgreSQL at {} stayed busy for {}s",
                    self.size,
                    self.connector.describe,
                    CHECKOUT_WAIT.as_secs()
                )));
            }
        }
    }

    /// A connection of its own, outside the pool (for session-level locks).
    pub(crate) fn connect_dedicated(&self) -> Result<Client> {
        self.connector.connect()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is two plain fields, consistent between statements: a panic elsewhere
        // leaves nothing half-done.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn put_back(&self, client: Client, kept: Kept) {
        let mut state = self.lock();
        if client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push((client, kept));
        }
        drop(state);
        self.freed.notify_one();
    }
}

/// The settings that open a connection: the URL's, TLS, and how to name the server in
/// messages.
#[derive(Clone)]
pub(crate) struct Connector {
    config: Config,
    tls: MakeRustlsConnect,
    describe: String,
}

impl Connector {
    /// A connection of its own, outside any pool.
    pub(crate) fn connect(&self) -> Result<Client> {
        let unavailable = |e: postgres::Error| {
            Error::StorageUnavailable(format!(
                "cannot connect to PostgreSQL at {}: {}",
                self.describe,
                quarry_core::error_chain(&e)
            ))
        };
        let mut client = self.config.connect(self.tls.clone()).map_err(unavailable)?;
        let defaults = [
            (
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_TIMEOUT.as_millis().to_string(),
            ),
            ("plan_cache_mode", PLAN_CACHE_MODE.to_owned()),
        ];
        let options = self.config.get_options().unwrap_or_default();
        let settings: String = defaults
            .iter()
            .filter(|(name, _)| !options.contains(name))
            .map(|(name, value)| format!("SET {name} = {value};"))
            .collect();
        // Whatever the URL or the server's configuration say: writes must see what others
        // committed before each statement (`chunk_vectors`' triggers read the other side of
        // a write once they hold its lock, schema v28); reads that need one snapshot ask
        // for it.
        client
            .batch_execute(&format!(
                "{settings}SET default_transaction_isolation = 'read committed';"
            ))
            .map_err(unavailable)?;
        Ok(client)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Closing a connection waits for its driver, which must not happen on a thread that
        // drives async tasks (a server shutting down drops its store there): close them on
        // a thread of their own.
        let idle = std::mem::take(&mut self.lock().idle);
        if !idle.is_empty() {
            let _ = std::thread::spawn(move || drop(idle)).join();
        }
    }
}

/// A connection borrowed from the pool; it goes back when dropped.
///
/// Its `query`, `query_one` and `query_opt` prepare each statement once per connection and
/// keep it: a repeated read then costs one round trip instead of two (parse and describe,
/// then bind and execute) and PostgreSQL may reuse its plan. They shadow `Client`'s methods
/// of the same names, so every read through a pooled connection gets them; so do the
/// statements of a [`PgConnection::cached_transaction`] (every `PgStore::write`), while
/// `transaction()` runs as `Client`'s does.
pub struct PgConnection<'a> {
    client: Option<Client>,
    kept: Kept,
    pool: &'a Pool,
}

impl PgConnection<'_> {
    /// The rows of `sql` (see the type's docs).
    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        self.with_statement(sql, |client, statement| client.query(statement, params))
    }

    /// The one row of `sql`; an error when there is none or more than one.
    pub(crate) fn query_one(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, postgres::Error> {
        self.with_statement(sql, |client, statement| client.query_one(statement, params))
    }

    /// The row of `sql`, if any; an error when there is more than one.
    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, postgres::Error> {
        self.with_statement(sql, |client, statement| client.query_opt(statement, params))
    }

    /// `run` with `sql` prepared on this connection; once more, freshly prepared, when a
    /// schema change (another node's migration) outdated the kept statement.
    fn with_statement<T>(
        &mut self,
        sql: &str,
        run: impl Fn(&mut Client, &Statement) -> Result<T, postgres::Error>,
    ) -> Result<T, postgres::Error> {
        let statement = self.prepared(sql)?;
        let client = self.client.as_mut().unwrap_or_else(|| unreachable!());
        match run(client, &statement) {
            Err(e) if e.code() == Some(&postgres::error::SqlState::FEATURE_NOT_SUPPORTED) => {
                self.kept.statements.remove(sql);
                let statement = self.prepared(sql)?;
                let client = self.client.as_mut().unwrap_or_else(|| unreachable!());
                run(client, &statement)
            }
            other => other,
        }
    }

    fn prepared(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        let client = self.client.as_mut().unwrap_or_else(|| unreachable!());
        kept_or_prepared(&mut self.kept.statements, sql, |sql| client.prepare(sql))
    }

    /// Runs `settings` (`SET` statements of session settings, one round trip) unless they
    /// are what this connection last ran through here: a search that needs the settings the
    /// previous one left costs no round trip for them. Settings changed this way must be
    /// changed only this way, or the connection's record of them would be wrong.
    pub(crate) fn set_session(&mut self, settings: &str) -> Result<(), postgres::Error> {
        if self.kept.settings.as_deref() == Some(settings) {
            return Ok(());
        }
        // Unknown until the batch has succeeded.
        self.kept.settings = None;
        let client = self.client.as_mut().unwrap_or_else(|| unreachable!());
        client.batch_execute(settings)?;
        self.kept.settings = Some(settings.to_owned());
        Ok(())
    }

    /// A transaction whose `query`, `query_one`, `query_opt` and `execute` use this
    /// connection's kept statements as reads do: a write transaction's statements cost one
    /// round trip each instead of two.
    pub(crate) fn cached_transaction(&mut self) -> Result<PgTransaction<'_>, postgres::Error> {
        let client = self.client.as_mut().unwrap_or_else(|| unreachable!());
        Ok(PgTransaction {
            tx: client.transaction()?,
            statements: &mut self.kept.statements,
        })
    }
}

/// What [`PgTransaction`]'s methods run: SQL text (prepared once per connection and kept) or
/// a statement prepared already.
pub(crate) trait Sql {
    /// The text or the statement.
    fn as_sql(&self) -> SqlRef<'_>;
}

/// See [`Sql`].
pub(crate) enum SqlRef<'a> {
    Text(&'a str),
    Prepared(&'a Statement),
}

impl Sql for str {
    fn as_sql(&self) -> SqlRef<'_> {
        SqlRef::Text(self)
    }
}

impl Sql for String {
    fn as_sql(&self) -> SqlRef<'_> {
        SqlRef::Text(self)
    }
}

impl Sql for Statement {
    fn as_sql(&self) -> SqlRef<'_> {
        SqlRef::Prepared(self)
    }
}

/// `statements`' statement for `sql`, prepared by `prepare` and kept when it is new.
fn kept_or_prepared(
    statements: &mut Statements,
    sql: &str,
    prepare: impl FnOnce(&str) -> Result<Statement, postgres::Error>,
) -> Result<Statement, postgres::Error> {
    if let Some(s) = statements.get(sql) {
        return Ok(s.clone());
    }
    let statement = prepare(sql)?;
    if statements.len() >= MAX_STATEMENTS {
        statements.clear();
    }
    statements.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}

/// A transaction on a pooled connection (see [`PgConnection::cached_transaction`]); its other
/// methods are `postgres::Transaction`'s. Prepared statements outlive a rollback (they belong
/// to the session), so a kept statement stays valid whatever the transaction's outcome; one
/// that a schema change outdated fails the transaction and is dropped from the cache, so the
/// retry prepares it afresh.
pub struct PgTransaction<'a> {
    tx: postgres::Transaction<'a>,
    statements: &'a mut Statements,
}

impl PgTransaction<'_> {
    /// The rows of `sql`.
    pub(crate) fn query<S: Sql + ?Sized>(
        &mut self,
        sql: &S,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        self.with_statement(sql, |tx, statement| tx.query(statement, params))
    }

    /// The one row of `sql`; an error when there is none or more than one.
    pub(crate) fn query_one<S: Sql + ?Sized>(
        &mut self,
        sql: &S,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, postgres::Error> {
        self.with_statement(sql, |tx, statement| tx.query_one(statement, params))
    }

    /// The row of `sql`, if any; an error when there is more than one.
    pub(crate) fn query_opt<S: Sql + ?Sized>(
        &mut self,
        sql: &S,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, postgres::Error> {
        self.with_statement(sql, |tx, statement| tx.query_opt(statement, params))
    }

    /// The rows `sql` changed.
    pub(crate) fn execute<S: Sql + ?Sized>(
        &mut self,
        sql: &S,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        self.with_statement(sql, |tx, statement| tx.execute(statement, params))
    }

    /// `sql` prepared on this connection once and kept, for a loop that binds it per item.
    pub(crate) fn prepare_kept(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        let tx = &mut self.tx;
        kept_or_prepared(self.statements, sql, |sql| tx.prepare(sql))
    }

    /// Commits the transaction.
    pub(crate) fn commit(self) -> Result<(), postgres::Error> {
        self.tx.commit()
    }

    fn with_statement<S: Sql + ?Sized, T>(
        &mut self,
        sql: &S,
        run: impl FnOnce(&mut postgres::Transaction<'_>, &Statement) -> Result<T, postgres::Error>,
    ) -> Result<T, postgres::Error> {
        let text = match sql.as_sql() {
            SqlRef::Text(text) => text,
            SqlRef::Prepared(statement) => return run(&mut self.tx, statement),
        };
        let statement = self.prepare_kept(text)?;
        let out = run(&mut self.tx, &statement);
        if let Err(e) = &out
            && e.code() == Some(&postgres::error::SqlState::FEATURE_NOT_SUPPORTED)
        {
            self.statements.remove(text);
        }
        out
    }
}

impl<'a> Deref for PgTransaction<'a> {
    type Target = postgres::Transaction<'a>;

    fn deref(&self) -> &postgres::Transaction<'a> {
        &self.tx
    }
}

impl<'a> DerefMut for PgTransaction<'a> {
    fn deref_mut(&mut self) -> &mut postgres::Transaction<'a> {
        &mut self.tx
    }
}

impl Deref for PgConnection<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        // Present from creation until drop.
        self.client.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl DerefMut for PgConnection<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for PgConnection<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            self.pool.put_back(client, std::mem::take(&mut self.kept));
        }
    }
}

/// The URL without libpq's `sslrootcert` parameter (which the driver's parser refuses),
/// and its value, percent-decoded.
fn take_root_cert(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut root = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", v)) => {
                root = Some(
                    percent_encoding::percent_decode_str(v)
                        .decode_utf8_lossy()
                        .into_owned(),
                )
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, root)
}

/// The certificates to trust: the public roots, or those of `root_cert` (a PEM file).
fn roots(root_cert: Option<&str>) -> Result<rustls::RootCertStore> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let path = match root_cert {
        None | Some("system") => {
            return Ok(rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            });
        }
        Some(p) => p,
    };
    let pem = std::fs::read(path).map_err(|e| {
        Error::InvalidInput(format!(
            "sslrootcert: cannot read the CA certificate file {path}: {e}"
        ))
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| {
            Error::InvalidInput(format!(
                "sslrootcert: {path} is not a PEM file of certificates: {e}"
            ))
        })?;
        roots.add(cert).map_err(|e| {
            Error::InvalidInput(format!(
                "sslrootcert: a certificate in {path} is not usable: {e}"
            ))
        })?;
    }
    if roots.is_empty() {
        return Err(Error::InvalidInput(format!(
            "sslrootcert: {path} holds no certificate (expected PEM, -----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(roots)
}

fn tls(root_cert: Option<&str>) -> Result<MakeRustlsConnect> {
    let roots = roots(root_cert)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Storage(format!("TLS setup for PostgreSQL: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}@{host}:{port}/{}",
        config.get_user().unwrap_or("(default user)"),
        config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or("(default database)")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslrootcert_is_taken_out_of_the_url_and_decoded() {
        assert_eq!(
            take_root_cert("postgres://u:p@h/db?sslmode=require&sslrootcert=%2Fetc%2Fca%20x.pem"),
            (
                "postgres://u:p@h/db?sslmode=require".to_owned(),
                Some("/etc/ca x.pem".to_owned())
            )
        );
        assert_eq!(
            take_root_cert("postgres://h/db?sslrootcert=/ca.pem"),
            ("postgres://h/db".to_owned(), Some("/ca.pem".to_owned()))
        );
        assert_eq!(
            take_root_cert("postgres://h/db"),
            ("postgres://h/db".to_owned(), None)
        );
        assert_eq!(
            take_root_cert("postgres://h/db?sslrootcert=100%"),
            ("postgres://h/db".to_owned(), Some("100%".to_owned()))
        );
    }

    #[test]
    fn a_bad_root_certificate_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = Pool::new(
            &format!("postgres://h/db?sslrootcert={}", missing.display()),
            1,
        )
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .contains("cannot read the CA certificate file"),
            "{err}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let err = Pool::new(
            &format!("postgres://h/db?sslrootcert={}", empty.display()),
            1,
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("holds no certificate"), "{err}");
        assert!(Pool::new("postgres://h/db?sslrootcert=system", 1).is_ok());
    }

    /// A node that freezes inside a transaction (SIGSTOP, a paused VM) must not hold its
    /// locks until it wakes: its session is ended. The URL's own setting wins, and keeps the
    /// other default: kept statements planned for the values bound each time.
    #[test]
    fn sessions_idle_inside_a_transaction_are_ended() {
        let Ok(url) = std::env::var("QUARRY_TEST_DATABASE_URL") else {
            eprintln!("skipped: QUARRY_TEST_DATABASE_URL is not set");
            return;
        };
        let pool = Pool::new(&url, 1).unwrap();
        let mut conn = pool.get().unwrap();
        let timeout: String = conn
            .query_one("SHOW idle_in_transaction_session_timeout", &[])
            .unwrap()
            .get(0);
        assert_eq!(timeout, "30s");
        // Kept statements are planned for the values bound each time.
        let mode: String = conn.query_one("SHOW plan_cache_mode", &[]).unwrap().get(0);
        assert_eq!(mode, "force_custom_plan");
        let sep = if url.contains('?') { '&' } else { '?' };
        let pool = Pool::new(
            &format!("{url}{sep}options=-c%20idle_in_transaction_session_timeout%3D300"),
            1,
        )
        .unwrap();
        let mut conn = pool.get().unwrap();
        let mode: String = conn.query_one("SHOW plan_cache_mode", &[]).unwrap().get(0);
        assert_eq!(
            mode, "force_custom_plan",
            "one setting of the URL's keeps the rest"
        );
        let mut tx = conn.transaction().unwrap();
        tx.execute("SELECT 1", &[]).unwrap();
        std::thread::sleep(Duration::from_millis(1_500));
        assert!(
            tx.execute("SELECT 1", &[]).is_err(),
            "the idle transaction's session was ended"
        );
    }

    /// A write transaction keeps its statements on the connection as reads do; one that a
    /// schema change outdated fails that transaction, is forgotten, and the retry works.
    #[test]
    fn write_transactions_keep_their_statements_and_forget_an_outdated_one() {
        let Ok(url) = std::env::var("QUARRY_TEST_DATABASE_URL") else {
            eprintln!("skipped: QUARRY_TEST_DATABASE_URL is not set");
            return;
        };
        let pool = Pool::new(&url, 1).unwrap();
        let mut conn = pool.get().unwrap();
        conn.batch_execute("CREATE TEMP TABLE kept_statements (a int)")
            .unwrap();
        let select = "SELECT * FROM kept_statements";
        let insert = "INSERT INTO kept_statements VALUES ($1)";
        let prepared = |conn: &mut PgConnection<'_>| -> i64 {
            let client: &mut Client = conn;
            client
                .query_one("SELECT count(*) FROM pg_prepared_statements", &[])
                .unwrap()
                .get(0)
        };
        for i in 0..2i32 {
            let mut tx = conn.cached_transaction().unwrap();
            tx.execute(insert, &[&i]).unwrap();
            assert_eq!(tx.query(select, &[]).unwrap().len(), i as usize + 1);
            tx.commit().unwrap();
        }
        let before = prepared(&mut conn);
        let mut tx = conn.cached_transaction().unwrap();
        tx.execute(insert, &[&9i32]).unwrap();
        drop(tx); // rolled back: the statement belongs to the session and stays
        assert!(conn.kept.statements.contains_key(insert));
        assert_eq!(
            conn.query(select, &[]).unwrap().len(),
            2,
            "the read shares it"
        );
        assert_eq!(prepared(&mut conn), before, "nothing was prepared again");

        conn.batch_execute("ALTER TABLE kept_statements ADD COLUMN b text")
            .unwrap();
        let mut tx = conn.cached_transaction().unwrap();
        let err = tx.query(select, &[]).unwrap_err();
        assert_eq!(
            err.code(),
            Some(&postgres::error::SqlState::FEATURE_NOT_SUPPORTED),
            "{err}"
        );
        drop(tx);
        assert!(!conn.kept.statements.contains_key(select));
        let mut tx = conn.cached_transaction().unwrap();
        let rows = tx.query(select, &[]).unwrap();
        assert_eq!((rows.len(), rows[0].len()), (2, 2));
        tx.commit().unwrap();
    }

    /// Session settings run once per connection while they stay the same; new ones run,
    /// and a failed batch is not remembered as applied.
    #[test]
    fn session_settings_run_only_when_they_change() {
        let Ok(url) = std::env::var("QUARRY_TEST_DATABASE_URL") else {
            eprintln!("skipped: QUARRY_TEST_DATABASE_URL is not set");
            return;
        };
        let pool = Pool::new(&url, 1).unwrap();
        let show = |conn: &mut PgConnection<'_>| -> String {
            let client: &mut Client = conn;
            client
                .query_one("SELECT current_setting('quarry_test.effort')", &[])
                .unwrap()
                .get(0)
        };
        let mut conn = pool.get().unwrap();
        conn.set_session("SET quarry_test.effort = 7").unwrap();
        assert_eq!(show(&mut conn), "7");
        // Changed behind its back (which only set_session may do): the same settings are
        // not run again, which is what saves the round trip.
        conn.batch_execute("SET quarry_test.effort = 1").unwrap();
        conn.set_session("SET quarry_test.effort = 7").unwrap();
        assert_eq!(show(&mut conn), "1");
        drop(conn);
        // The record travels with the connection through the pool.
        let mut conn = pool.get().unwrap();
        assert_eq!(
            conn.kept.settings.as_deref(),
            Some("SET quarry_test.effort = 7")
        );
        conn.set_session("SET quarry_test.effort = 8").unwrap();
        assert_eq!(show(&mut conn), "8");
        // Half applied, then failed: nothing is remembered, so the next call runs it all.
        let broken = "SET quarry_test.effort = 9; SET no_such_setting = 1";
        assert!(conn.set_session(broken).is_err());
        assert_eq!(conn.kept.settings, None);
        conn.set_session("SET quarry_test.effort = 8").unwrap();
        assert_eq!(show(&mut conn), "8");
    }
}
