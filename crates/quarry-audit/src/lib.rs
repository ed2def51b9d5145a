//! The audit log (issue 27): who called which tool, wrote, deleted or searched what, changed
//! tokens or memberships, or was refused — with the outcome and how long it took.
//!
//! Surfaces build an [`AuditEvent`] with [`event`] and hand it to [`AuditLog::record`], which
//! never blocks a request: events go through a bounded queue to one writer thread per
//! process that appends them to the store in batches (one transaction, one round trip on
//! PostgreSQL), so the log is shared by every node and nothing of it lives only in memory
//! for long. A full queue drops the event and counts it ([`AuditLog::dropped`]) rather than
//! slow every request behind the store. The writer also prunes events past the retention.
//!
//! The same writer keeps the *insight log* (issue 69): every search that ran
//! ([`AuditLog::search`], [`AuditLog::record_search`]) and the daily usage counts the events
//! and searches add up to ([`usage`]), which owners read to see what their knowledge bases are
//! asked and cannot answer ([`wording`] groups similar questions) and how they are used.
//!
//! What is never recorded: secrets (tokens, keys, headers), and text the caller sent — tool
//! arguments pass through [`redact`], search queries are kept in the audit log only when the
//! administrator turns that on ([`AuditSettings::record_queries`]), and in the insight log only
//! for searches that found nothing, unless turned off ([`AuditSettings::insight_queries`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use quarry_core::{Principal, Result, SettingError, now_millis};
use quarry_store::Store;
pub use quarry_store::{AuditEvent, AuditQuery, AuditRecord, SearchRecord};
use serde_json::{Map, Value, json};

pub mod usage;
pub mod wording;
mod words;

pub use words::{
    APPROVAL_REQUEST, AUTH_FAILURE, DENIED, ERROR, OK, SEARCH, SIGN_IN, SOURCE_SYNC, TOOL_CALL,
    WRITE,
};

/// Most events waiting for the writer; past it, events are dropped and counted.
pub const QUEUE_CAPACITY: usize = 16_384;
/// Most events in one batch.
const BATCH_MAX: usize = 512;
/// How often the writer wakes to write what is queued.
const BATCH_WINDOW: Duration = Duration::from_millis(100);
/// How often the writer prunes events past the retention.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// Tries to write one batch before it is dropped (and counted).
const WRITE_TRIES: u32 = 3;
const DAY_MS: i64 = quarry_store::DAY_MS;
/// Most characters of a query the insight log keeps.
const QUERY_CHARS: usize = 500;

/// What the administrator chose (`QUARRY_AUDIT_RETENTION_DAYS`, `QUARRY_AUDIT_QUERIES`,
/// `QUARRY_INSIGHT_RETENTION_DAYS`, `QUARRY_INSIGHT_QUERIES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    /// Events older than this many days are removed; 0 keeps them forever.
    pub retention_days: u32,
    /// Whether a search's query text is recorded in the audit log (off by default: queries
    /// can hold what the documents hold).
    pub record_queries: bool,
    /// Searches and usage counts older than this many days are removed; 0 keeps them forever.
    pub insight_retention_days: u32,
    /// Whether the insight log keeps the text of searches that found nothing (on by default:
    /// owners read it to learn what to write; off keeps only a hash that groups them).
    pub insight_queries: bool,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            retention_days: 90,
            record_queries: false,
            insight_retention_days: 90,
            insight_queries: true,
        }
    }
}

/// `QUARRY_AUDIT_RETENTION_DAYS`: days events are kept (0: forever).
pub const ENV_RETENTION_DAYS: &str = "QUARRY_AUDIT_RETENTION_DAYS";
/// `QUARRY_AUDIT_QUERIES`: `on` records search query text.
pub const ENV_QUERIES: &str = "QUARRY_AUDIT_QUERIES";
/// `QUARRY_INSIGHT_RETENTION_DAYS`: days searches and usage counts are kept (0: forever).
pub const ENV_INSIGHT_RETENTION_DAYS: &str = "QUARRY_INSIGHT_RETENTION_DAYS";
/// `QUARRY_INSIGHT_QUERIES`: `off` keeps no text of unanswered searches.
pub const ENV_INSIGHT_QUERIES: &str = "QUARRY_INSIGHT_QUERIES";

fn switch(name: &str, v: &str) -> std::result::Result<bool, SettingError> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(SettingError::new(name, v, "use on or off")),
    }
}

fn days(name: &str, v: &str, what: &str) -> std::result::Result<u32, SettingError> {
    v.parse().map_err(|_| {
        SettingError::new(
            name,
            v,
            format!("give a whole number of days (0 keeps {what} forever)"),
        )
    })
}

impl AuditSettings {
    /// The settings from the process's variables, read through `get` (the CLI's table).
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Self, SettingError> {
        let var = |k: &str| {
            get(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut s = AuditSettings::default();
        if let Some(v) = var(ENV_RETENTION_DAYS) {
            s.retention_days = days(ENV_RETENTION_DAYS, &v, "events")?;
        }
        if let Some(v) = var(ENV_QUERIES) {
            s.record_queries = switch(ENV_QUERIES, &v)?;
        }
        if let Some(v) = var(ENV_INSIGHT_RETENTION_DAYS) {
            s.insight_retention_days = days(ENV_INSIGHT_RETENTION_DAYS, &v, "searches")?;
        }
        if let Some(v) = var(ENV_INSIGHT_QUERIES) {
            s.insight_queries = switch(ENV_INSIGHT_QUERIES, &v)?;
        }
        Ok(s)
    }
}

/// The writer's queue.
enum Message {
    Event(Box<AuditEvent>),
    Search(Box<SearchRecord>),
    Usage(Box<quarry_store::UsageCount>),
    /// Answered once every event queued before it is written (or dropped).
    Flush(SyncSender<()>),
}

/// The process's audit writer.
pub struct AuditLog {
    sender: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    settings: AuditSettings,
    /// The writer thread, unparked by a flush.
    writer: std::thread::Thread,
}

impl AuditLog {
    /// Starts the writer thread over `store`.
    pub fn start(store: Arc<dyn Store>, settings: AuditSettings) -> Result<Arc<AuditLog>> {
        let (sender, receiver) = sync_channel(QUEUE_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let writer = Writer {
            store,
            receiver,
            dropped: dropped.clone(),
            written: written.clone(),
            retention_days: settings.retention_days,
            insight_retention_days: settings.insight_retention_days,
        };
        // The thread ends once the log is dropped (its queue's sender goes with it).
        let handle = std::thread::Builder::new()
            .name("quarry-audit".into())
            .spawn(move || writer.run())
            .map_err(|e| {
                quarry_core::Error::Storage(format!("cannot start the audit writer: {e}"))
            })?;
        Ok(Arc::new(AuditLog {
            sender,
            dropped,
            written,
            settings,
            writer: handle.thread().clone(),
        }))
    }

    /// The administrator's settings.
    pub fn settings(&self) -> &AuditSettings {
        &self.settings
    }

    /// Queues an event; never blocks (a full queue drops it and counts it).
    pub fn record(&self, event: AuditEvent) {
        self.queue(Message::Event(Box::new(event)));
    }

    /// Queues a search for the insight log ([`AuditLog::search`] makes one); never blocks.
    pub fn record_search(&self, search: SearchRecord) {
        self.queue(Message::Search(Box::new(search)));
    }

    /// A search by `principal` on `surface` as the insight log keeps it: unanswered when
    /// nothing came back; its wording and text kept only then, the text only when the
    /// administrator keeps text (else the wording is a hash of the terms). `knowledge_base`: the one knowledge base it was
    /// limited to, if it was.
    pub fn search(
        &self,
        principal: &Principal,
        surface: &str,
        knowledge_base: Option<&str>,
        query: &str,
        results: usize,
        top_score: Option<f64>,
    ) -> SearchRecord {
        let identity = principal.identity.as_ref();
        let unanswered = results == 0;
        let readable = self.settings.insight_queries && unanswered;
        // A caller's NUL would make PostgreSQL refuse the whole batch, others' searches with it.
        let query = query.replace('\0', "");
        let query = query.as_str();
        SearchRecord {
            at: now_millis(),
            space_id: principal.space_id.clone(),
            knowledge_base: knowledge_base.unwrap_or_default().replace('\0', ""),
            user_id: identity.map(|i| i.user_id.clone()).unwrap_or_default(),
            token_id: identity
                .and_then(|i| i.token_id.clone())
                .unwrap_or_default(),
            surface: surface.to_owned(),
            results: u32::try_from(results).unwrap_or(u32::MAX),
            top_score: top_score.filter(|s| s.is_finite()),
            unanswered,
            // Only unanswered searches are grouped; an answered one keeps nothing of its words.
            wording: if unanswered {
                wording::wording(query, readable)
            } else {
                String::new()
            },
            query: readable.then(|| query.chars().take(QUERY_CHARS).collect()),
        }
    }

    /// Queues `requests` to a model and the `tokens` they took for `purpose` (`chat`) on
    /// `principal`'s behalf (the usage metric `model_tokens`); never blocks.
    pub fn record_model_use(
        &self,
        principal: &Principal,
        purpose: &str,
        requests: u64,
        tokens: u64,
    ) {
        self.queue(Message::Usage(Box::new(usage::of_model(
            principal, purpose, requests, tokens,
        ))));
    }

    /// `requests` to a model for `purpose` and the `tokens` they took, made by a space's
    /// background work (embedding what was uploaded or synced): counted for the space.
    pub fn record_space_model_use(
        &self,
        space_id: &str,
        purpose: &str,
        requests: u64,
        tokens: u64,
    ) {
        self.queue(Message::Usage(Box::new(usage::of_space_model(
            space_id, purpose, requests, tokens,
        ))));
    }

    fn queue(&self, message: Message) {
        match self.sender.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!("audit queue full or closed: events are being dropped");
                }
            }
        }
    }

    /// Waits (at most `timeout`) until every event recorded before this call is in the
    /// store: a read of the log on this node then sees this node's own events. Blocks:
    /// call it from a blocking thread.
    pub fn flush(&self, timeout: Duration) {
        let (tx, rx) = sync_channel(1);
        let deadline = Instant::now() + timeout;
        let mut message = Message::Flush(tx);
        loop {
            match self.sender.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    message = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
            self.writer.unpark();
        }
        self.writer.unpark();
        let _ = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }

    /// Events and searches dropped since start (queue full, or the store refused a batch
    /// three times).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Events and searches written since start.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

struct Writer {
    store: Arc<dyn Store>,
    receiver: Receiver<Message>,
    dropped: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    retention_days: u32,
    insight_retention_days: u32,
}

/// What the writer has queued for the store.
#[derive(Default)]
struct Batch {
    events: Vec<AuditEvent>,
    searches: Vec<SearchRecord>,
    /// Counts recorded as they are (a model's use).
    usage: Vec<quarry_store::UsageCount>,
}

impl Batch {
    fn len(&self) -> usize {
        self.events.len() + self.searches.len() + self.usage.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Writer {
    /// Wakes every [`BATCH_WINDOW`] (or when a flush unparks it) and writes what is queued:
    /// a request's `record` then never has to wake this thread, only queue.
    fn run(self) {
        let mut next_prune = Instant::now();
        let mut batch = Batch::default();
        let mut waiting: Vec<SyncSender<()>> = Vec::new();
        loop {
            if Instant::now() >= next_prune {
                self.prune();
                next_prune = Instant::now() + PRUNE_EVERY;
            }
            let mut closed = false;
            loop {
                match self.receiver.try_recv() {
                    Ok(Message::Event(e)) => batch.events.push(*e),
                    Ok(Message::Search(r)) => batch.searches.push(*r),
                    Ok(Message::Usage(u)) => batch.usage.push(*u),
                    Ok(Message::Flush(done)) => waiting.push(done),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
                if batch.len() >= BATCH_MAX {
                    self.write(&mut batch);
                }
            }
            self.write(&mut batch);
            for done in waiting.drain(..) {
                let _ = done.try_send(());
            }
            if closed {
                return;
            }
            std::thread::park_timeout(BATCH_WINDOW);
        }
    }

    /// Writes the events, then the searches with the usage counts both add (two
    /// transactions: a failure of one does not lose the other).
    fn write(&self, batch: &mut Batch) {
        if batch.is_empty() {
            return;
        }
        let usage: Vec<_> = batch
            .events
            .iter()
            .flat_map(usage::of_event)
            .chain(batch.searches.iter().flat_map(usage::of_search))
            .chain(batch.usage.drain(..))
            .collect();
        let events = std::mem::take(&mut batch.events);
        let searches = std::mem::take(&mut batch.searches);
        if !events.is_empty() {
            self.retry("audit", events.len(), || self.store.append_audit(&events));
        }
        if !searches.is_empty() || !usage.is_empty() {
            self.retry("insight", searches.len(), || {
                self.store.append_insight(&searches, &usage)
            });
        }
    }

    /// Tries `append` up to [`WRITE_TRIES`] times; counts `n` rows written or dropped.
    fn retry(&self, what: &str, n: usize, append: impl Fn() -> Result<()>) {
        for attempt in 1..=WRITE_TRIES {
            match append() {
                Ok(()) => {
                    self.written.fetch_add(n as u64, Ordering::Relaxed);
                    return;
                }
                Err(e) if attempt < WRITE_TRIES => {
                    tracing::warn!(error = %e, attempt, "{what} batch not written; retrying");
                    std::thread::sleep(Duration::from_millis(200 * u64::from(attempt)));
                }
                Err(e) => {
                    tracing::error!(error = %e, rows = n, "{what} batch dropped");
                    self.dropped.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    }

    fn prune(&self) {
        let cut = |days: u32| now_millis().saturating_sub(i64::from(days) * DAY_MS);
        if self.retention_days > 0 {
            match self.store.prune_audit(cut(self.retention_days)) {
                Ok(0) => {}
                Ok(n) => tracing::info!(events = n, "audit events past the retention removed"),
                Err(e) => tracing::warn!(error = %e, "audit log not pruned"),
            }
        }
        if self.insight_retention_days > 0 {
            match self.store.prune_insight(cut(self.insight_retention_days)) {
                Ok(0) => {}
                Ok(n) => tracing::info!(searches = n, "searches past the retention removed"),
                Err(e) => tracing::warn!(error = %e, "insight log not pruned"),
            }
        }
    }
}

/// An event by `principal` (user, token, space), now, with no duration and no detail.
pub fn event(
    principal: Option<&Principal>,
    action: &str,
    target: impl Into<String>,
    outcome: &str,
) -> AuditEvent {
    let identity = principal.and_then(|p| p.identity.as_ref());
    AuditEvent {
        at: now_millis(),
        space_id: principal.map(|p| p.space_id.clone()),
        user_id: identity.map(|i| i.user_id.clone()),
        user_name: identity.map(|i| i.user.clone()),
        token_id: identity.and_then(|i| i.token_id.clone()),
        client: None,
        action: action.to_owned(),
        target: target.into(),
        outcome: outcome.to_owned(),
        duration_ms: None,
        detail: "{}".into(),
    }
}

/// The outcome word for an HTTP status.
pub fn outcome_of_status(status: u16) -> &'static str {
    match status {
        401 | 403 => DENIED,
        s if s < 400 => OK,
        _ => ERROR,
    }
}

/// How deep [`redact`] walks arguments.
const REDACT_DEPTH: usize = 4;

/// Tool arguments as the audit log keeps them. The rule: object keys are kept; numbers,
/// booleans and null are kept; every string becomes `"<N chars>"`; arrays and objects are
/// walked to depth 4 and then become `"<array of N>"` / `"<object of N>"`; arrays keep
/// their first 20 items. So the log shows how a tool was called without holding what was
/// sent (text, paths, credentials).
pub fn redact(args: &Value) -> Value {
    redact_at(args, 0)
}

/// [`redact`] for an object's fields (MCP arguments).
pub fn redact_object(args: &Map<String, Value>) -> Value {
    Value::Object(
        args.iter()
            .map(|(k, v)| (k.clone(), redact_at(v, 1)))
            .collect(),
    )
}

fn redact_at(v: &Value, depth: usize) -> Value {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => v.clone(),
        Value::String(s) => json!(format!("<{} chars>", s.chars().count())),
        Value::Array(items) if depth >= REDACT_DEPTH => {
            json!(format!("<array of {}>", items.len()))
        }
        Value::Object(map) if depth >= REDACT_DEPTH => json!(format!("<object of {}>", map.len())),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .take(20)
                .map(|i| redact_at(i, depth + 1))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), redact_at(v, depth + 1)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

#[cfg(test)]
mod tests;
