//! Progress of an upstream tool call, relayed to the MCP client that called it through the
//! hub: in the order the upstream sent it, and all of it before the call's answer.

use std::sync::Arc;
use std::time::Duration;

use quarry_hub::ProgressSink;
use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::sync::{mpsc, oneshot};

/// The longest an answer waits for its progress to reach a client that reads slowly.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

enum Relayed {
    Progress(ProgressNotificationParam),
    /// Answered once everything queued before it was sent.
    Flush(oneshot::Sender<()>),
}

/// One task per call sends its progress notifications one at a time, each under the
/// client's own token (a task per notification could send them out of order, or after the
/// answer).
pub(crate) struct ProgressRelay {
    queue: mpsc::UnboundedSender<Relayed>,
}

impl ProgressRelay {
    pub(crate) fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (queue, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(item) = rx.recv().await {
                match item {
                    Relayed::Progress(mut p) => {
                        p.progress_token = token.clone();
                        // A client gone away ends the call through its cancellation.
                        let _ = peer.notify_progress(p).await;
                    }
                    Relayed::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        ProgressRelay { queue }
    }

    /// What the hub calls with each progress notification of the upstream call.
    pub(crate) fn sink(&self) -> ProgressSink {
        let queue = self.queue.clone();
        Arc::new(move |p| {
            let _ = queue.send(Relayed::Progress(p));
        })
    }

    /// Returns once every notification handed to the sink so far has been sent (or after
    /// [`FLUSH_WAIT`]): the call's answer goes after them.
    pub(crate) async fn flush(self) {
        let (done, sent) = oneshot::channel();
        if self.queue.send(Relayed::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(FLUSH_WAIT, sent).await;
        }
    }
}
