//! The local fast path: a running server answers `quarry search|vsearch|query` for the
//! command line of the same data directory, so the CLI neither opens the index nor loads a
//! model (11–16 s for multilingual-e5-small) per call.
//!
//! The server listens on a Unix socket in its data directory ([`SOCKET_NAME`], mode 0600):
//! who can connect could open the data directory itself, so the socket grants what the
//! CLI would have anyway — the engine as the server opened it — and nothing to anyone else.
//! One request per connection, one JSON line each way: [`LocalRequest`] and [`LocalReply`].
//!
//! The server answers only when the command would run with the same settings here as in
//! the CLI (store, models, their environment: a digest the CLI computes from the settings
//! the command reads, and the server from its own); otherwise, or when nothing listens, the
//! CLI runs the search itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quarry_engine::{SearchAnswer, SearchCommand};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// The socket's file name in the data directory.
pub const SOCKET_NAME: &str = "quarry.sock";
/// Largest request line read (a query with its filter and sub-queries is far smaller).
const MAX_REQUEST_BYTES: u64 = 1 << 20;
/// Largest reply read (50 results with their snippets and metadata are far smaller).
const MAX_REPLY_BYTES: u64 = 64 << 20;

/// What the CLI sends.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct LocalRequest {
    /// The digest of the settings the command runs with (see the module docs).
    pub settings: String,
    /// The search.
    pub command: SearchCommand,
}

/// What the server answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LocalReply {
    /// The search ran.
    Answer(SearchAnswer),
    /// The search failed as it would have in the CLI (an invalid filter, no vector index…).
    Error(String),
    /// This server runs with other settings for this command: the CLI runs it itself.
    OtherSettings,
}

/// Where a server listens for its CLI, and the settings digest per command it answers.
pub struct LocalSocket {
    /// The socket's path ([`SOCKET_NAME`] in the data directory).
    pub path: PathBuf,
    /// Command name (`search`, `vsearch`, `query`) → the digest of the settings it runs
    /// with here.
    pub settings: BTreeMap<String, String>,
}

/// Serves [`LocalRequest`]s until `shutdown`. A socket another live process serves is left
/// to it; one left behind by a process that died is replaced. Problems are logged, never
/// fatal: the CLI then loads its own models.
#[cfg(unix)]
pub async fn serve_local(state: Arc<AppState>, socket: LocalSocket, shutdown: CancellationToken) {
    use tokio::net::{UnixListener, UnixStream};

    let path = socket.path.clone();
    if UnixStream::connect(&path).await.is_ok() {
        tracing::info!(path = %path.display(), "another process answers the CLI on this data directory's socket");
        return;
    }
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot listen for the CLI (searches from the command line will load their own models)");
            return;
        }
    };
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            tracing::warn!(path = %path.display(), error = %e, "cannot restrict the CLI socket to this user; closing it");
            let _ = std::fs::remove_file(&path);
            return;
        }
    }
    tracing::debug!(path = %path.display(), "answering the CLI's searches");
    let settings = Arc::new(socket.settings);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(answer(state.clone(), settings.clone(), stream));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "CLI socket: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    let _ = std::fs::remove_file(&path);
}

#[cfg(unix)]
async fn answer(
    state: Arc<AppState>,
    settings: Arc<BTreeMap<String, String>>,
    stream: tokio::net::UnixStream,
) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    if let Err(e) = BufReader::new(read.take(MAX_REQUEST_BYTES))
        .read_until(b'\n', &mut line)
        .await
    {
        tracing::debug!(error = %e, "CLI socket: unreadable request");
        return;
    }
    let reply = match serde_json::from_slice::<LocalRequest>(&line) {
        Err(e) => LocalReply::Error(format!("malformed request from the CLI: {e}")),
        // Draining: the CLI runs the search itself rather than wait for a server that goes.
        Ok(_) if state.is_shutting_down() => LocalReply::OtherSettings,
        Ok(req) if settings.get(req.command.verb.name()) != Some(&req.settings) => {
            LocalReply::OtherSettings
        }
        Ok(req) => {
            let engine = state.root_engine().clone();
            // Read-your-writes: what the CLI (or anyone) committed before asking is applied
            // to this node's index first, as when the CLI opened the index itself.
            let search = move || {
                engine.wait_for_horizon(engine.feed_horizon()?, crate::http::consistency::WAIT)?;
                engine.run_search_command(&req.command)
            };
            match crate::http::run_blocking_raw(search).await {
                Ok(Ok(answer)) => LocalReply::Answer(answer),
                Ok(Err(e)) => LocalReply::Error(quarry_core::error_chain(&e)),
                Err(e) => LocalReply::Error(e.detail),
            }
        }
    };
    let mut bytes = match serde_json::to_vec(&reply) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "CLI socket: cannot encode the reply");
            return;
        }
    };
    bytes.push(b'\n');
    if let Err(e) = write.write_all(&bytes).await {
        tracing::debug!(error = %e, "CLI socket: the CLI went away");
    }
}

/// Without Unix sockets there is no fast path: the CLI loads its own models.
#[cfg(not(unix))]
pub async fn serve_local(_: Arc<AppState>, _: LocalSocket, _: CancellationToken) {}

/// How [`ask_local`] ended.
#[derive(Debug)]
pub enum LocalOutcome {
    /// The server answered.
    Answer(SearchAnswer),
    /// The server ran the search and it failed, with this message.
    Failed(String),
    /// No answer from a server (none listens, other settings, an unreadable reply): the
    /// CLI runs the search itself. The reason is for `--verbose`-style diagnostics.
    NotServed(String),
}

/// Asks the server listening at `socket` (the CLI side of the fast path).
pub fn ask_local(socket: &Path, settings: &str, command: &SearchCommand) -> LocalOutcome {
    #[cfg(unix)]
    {
        use std::io::{Read, Write};
        let mut stream = match std::os::unix::net::UnixStream::connect(socket) {
            Ok(s) => s,
            Err(e) => return LocalOutcome::NotServed(format!("no server: {e}")),
        };
        let request = LocalRequest {
            settings: settings.to_owned(),
            command: command.clone(),
        };
        let mut line = match serde_json::to_vec(&request) {
            Ok(l) => l,
            Err(e) => return LocalOutcome::NotServed(format!("cannot encode the request: {e}")),
        };
        line.push(b'\n');
        if let Err(e) = stream.write_all(&line) {
            return LocalOutcome::NotServed(format!("cannot send the request: {e}"));
        }
        let mut reply = Vec::new();
        if let Err(e) = (&mut stream).take(MAX_REPLY_BYTES).read_to_end(&mut reply) {
            return LocalOutcome::NotServed(format!("cannot read the reply: {e}"));
        }
        match serde_json::from_slice::<LocalReply>(&reply) {
            Ok(LocalReply::Answer(a)) => LocalOutcome::Answer(a),
            Ok(LocalReply::Error(message)) => LocalOutcome::Failed(message),
            Ok(LocalReply::OtherSettings) => {
                LocalOutcome::NotServed("the server runs with other settings".into())
            }
            Err(e) => LocalOutcome::NotServed(format!("unreadable reply: {e}")),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (socket, settings, command);
        LocalOutcome::NotServed("no Unix sockets on this platform".into())
    }
}
