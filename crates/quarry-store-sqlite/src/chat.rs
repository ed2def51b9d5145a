//! [`ChatStore`] on SQLite.
//!
//! Messages carry no owner of their own: every statement that touches them joins (or
//! sub-selects) through `chat_conversations` on the owner, so a message id or conversation
//! id learned from elsewhere never opens another owner's rows.

use quarry_core::{Error, Result};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::{conflict_or_db, db_err};
use crate::store::SqliteStore;
use quarry_store::{ChatMessageRow, ChatStore, ConversationRow, ConversationSummary};

const CONVERSATION_COLUMNS: &str =
    "c.id, c.owner, c.title, c.kb_ids, c.model, c.created_at, c.updated_at";

fn conversation_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ConversationRow> {
    Ok(ConversationRow {
        id: r.get(0)?,
        owner: r.get(1)?,
        title: r.get(2)?,
        kb_ids: r.get(3)?,
        model: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}

const MESSAGE_COLUMNS: &str = "m.id, m.conversation_id, m.seq, m.role, m.content, m.sources, \
     m.tool_calls, m.status, m.usage, m.created_at";

fn message_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChatMessageRow> {
    Ok(ChatMessageRow {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        seq: r.get(2)?,
        role: r.get(3)?,
        content: r.get(4)?,
        sources: r.get(5)?,
        tool_calls: r.get(6)?,
        status: r.get(7)?,
        usage: r.get(8)?,
        created_at: r.get(9)?,
    })
}

impl ChatStore for SqliteStore {
    fn insert_conversation(&self, c: &ConversationRow) -> Result<()> {
        self.write(|tx| insert_conversation(tx, c))
    }

    fn conversations(&self, owner: &str, limit: usize) -> Result<Vec<ConversationSummary>> {
        // SQLite's LIMIT is an i64; anything larger means "all of them".
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {CONVERSATION_COLUMNS}, \
                 (SELECT COUNT(*) FROM chat_messages m WHERE m.conversation_id = c.id) \
                 FROM chat_conversations c WHERE c.owner = ?1 \
                 ORDER BY c.updated_at DESC, c.created_at DESC, c.id LIMIT ?2"
            ))
            .map_err(db_err)?;
        stmt.query_map(params![owner, limit], |r| {
            Ok(ConversationSummary {
                conversation: conversation_from_row(r)?,
                message_count: r.get(7)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(db_err)
    }

    fn conversation(&self, owner: &str, id: &str) -> Result<Option<ConversationRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {CONVERSATION_COLUMNS} FROM chat_conversations c \
                 WHERE c.owner = ?1 AND c.id = ?2"
            ))
            .map_err(db_err)?;
        stmt.query_row(params![owner, id], conversation_from_row)
            .optional()
            .map_err(db_err)
    }

    fn update_conversation(&self, c: &ConversationRow) -> Result<bool> {
        self.write(|tx| update_conversation(tx, c))
    }

    fn delete_conversation(&self, owner: &str, id: &str) -> Result<bool> {
        self.write(|tx| {
            // Messages go with it (ON DELETE CASCADE; `open` turns foreign keys on).
            let n = tx
                .execute(
                    "DELETE FROM chat_conversations WHERE owner = ?1 AND id = ?2",
                    params![owner, id],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn append_message(&self, owner: &str, m: &ChatMessageRow) -> Result<i64> {
        self.write(|tx| append_message(tx, owner, m))
    }

    fn store_turn(
        &self,
        conversation: &ConversationRow,
        new: bool,
        messages: &[ChatMessageRow],
    ) -> Result<()> {
        self.write(|tx| {
            if new {
                insert_conversation(tx, conversation)?;
            } else if !update_conversation(tx, conversation)? {
                return Err(Error::NotFound(format!(
                    "conversation '{}' not found",
                    conversation.id
                )));
            }
            for m in messages {
                append_message(tx, &conversation.owner, m)?;
            }
            Ok(())
        })
    }

    fn update_message(&self, owner: &str, m: &ChatMessageRow) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE chat_messages SET content = ?4, sources = ?5, tool_calls = ?6, \
                     status = ?7, usage = ?8 \
                     WHERE id = ?2 AND conversation_id = ?3 AND conversation_id IN \
                     (SELECT id FROM chat_conversations WHERE owner = ?1)",
                    params![
                        owner,
                        m.id,
                        m.conversation_id,
                        m.content,
                        m.sources,
                        m.tool_calls,
                        m.status,
                        m.usage
                    ],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn messages(&self, owner: &str, conversation_id: &str) -> Result<Vec<ChatMessageRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM chat_messages m \
                 JOIN chat_conversations c ON c.id = m.conversation_id \
                 WHERE c.owner = ?1 AND m.conversation_id = ?2 ORDER BY m.seq"
            ))
            .map_err(db_err)?;
        stmt.query_map(params![owner, conversation_id], message_from_row)
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }
}

fn insert_conversation(tx: &Transaction<'_>, c: &ConversationRow) -> Result<()> {
    tx.execute(
        "INSERT INTO chat_conversations \
         (id, owner, title, kb_ids, model, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            c.id,
            c.owner,
            c.title,
            c.kb_ids,
            c.model,
            c.created_at,
            c.updated_at
        ],
    )
    .map_err(|e| conflict_or_db(e, || format!("conversation '{}' already exists", c.id)))?;
    Ok(())
}

fn update_conversation(tx: &Transaction<'_>, c: &ConversationRow) -> Result<bool> {
    let n = tx
        .execute(
            "UPDATE chat_conversations SET title = ?3, kb_ids = ?4, model = ?5 \
             WHERE owner = ?1 AND id = ?2",
            params![c.owner, c.id, c.title, c.kb_ids, c.model],
        )
        .map_err(db_err)?;
    Ok(n > 0)
}

/// Inside a write transaction, which holds the write lock before the max is read: two
/// appends to one conversation (two tabs, two nodes) can never pick the same seq.
fn append_message(tx: &Transaction<'_>, owner: &str, m: &ChatMessageRow) -> Result<i64> {
    let n = tx
        .execute(
            "UPDATE chat_conversations SET updated_at = ?3 WHERE owner = ?1 AND id = ?2",
            params![owner, m.conversation_id, m.created_at],
        )
        .map_err(db_err)?;
    if n == 0 {
        // The same words whether the id is unknown or another owner's.
        return Err(Error::NotFound(format!(
            "conversation '{}' not found",
            m.conversation_id
        )));
    }
    let seq: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM chat_messages WHERE conversation_id = ?1",
            [&m.conversation_id],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    tx.execute(
        "INSERT INTO chat_messages (id, conversation_id, seq, role, content, sources, \
         tool_calls, status, usage, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            m.id,
            m.conversation_id,
            seq,
            m.role,
            m.content,
            m.sources,
            m.tool_calls,
            m.status,
            m.usage,
            m.created_at
        ],
    )
    .map_err(|e| conflict_or_db(e, || format!("message '{}' already exists", m.id)))?;
    Ok(seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quarry_store::conformance::chat::{conversation, message};
    use rusqlite::Connection;

    use crate::migrate::SCHEMA_VERSION;

    // The chat store's behaviour is checked on every backend by the conformance suite
    // (`quarry_store::conformance::chat`); what is left here is this backend's own.

    #[test]
    fn version_5_databases_gain_chat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        {
            let conn = Connection::open(&path).unwrap();
            crate::migrate::schema_at(&conn, 5);
            conn.execute_batch(
                "PRAGMA user_version = 5; \
                 INSERT INTO hub_generations (owner, generation) VALUES ('alice', 7);",
            )
            .unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        let version: i64 = s
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        const { assert!(SCHEMA_VERSION >= 6) };
        s.insert_conversation(&conversation("alice", "c1", 1))
            .unwrap();
        assert_eq!(
            s.append_message("alice", &message("c1", "m1", "user", 2))
                .unwrap(),
            1
        );
        // Earlier tables keep their rows.
        use quarry_store::HubStore;
        assert_eq!(s.hub_generation("alice").unwrap(), 7);
        // Opening again does not migrate twice.
        drop(s);
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.messages("alice", "c1").unwrap().len(), 1);
    }
}
