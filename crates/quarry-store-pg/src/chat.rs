//! [`quarry_store::ChatStore`] on PostgreSQL.
//!
//! Messages carry no owner of their own: every statement that touches them joins (or
//! sub-selects) through `chat_conversations` on the owner, so a message id or conversation
//! id learned from elsewhere never opens another owner's rows.
//!
//! `seq` under concurrency: an append first updates its conversation's `updated_at`, which
//! row-locks the conversation until the transaction ends; the next statement, with a snapshot
//! taken after the lock was granted, reads the highest `seq`. Two appends to one
//! conversation (two tabs, two nodes) therefore run one after the other and never pick the
//! same number; appends to different conversations do not wait for each other.

use postgres::Row;
use quarry_core::{Error, Result};
use quarry_store::{ChatMessageRow, ChatStore, ConversationRow, ConversationSummary};

use crate::error::{conflict_or_db, db_err};
use crate::pg_store::PgStore;

const CONVERSATION_COLUMNS: &str =
    "c.id, c.owner, c.title, c.kb_ids, c.model, c.created_at, c.updated_at";

/// `seq` is an `integer` column, read as the row type's `i64`.
const MESSAGE_COLUMNS: &str = "m.id, m.conversation_id, m.seq::bigint, m.role, m.content, \
     m.sources, m.tool_calls, m.status, m.usage, m.created_at";

impl ChatStore for PgStore {
    fn insert_conversation(&self, c: &ConversationRow) -> Result<()> {
        insert_conversation(&mut *self.conn()?, c)
    }

    fn conversations(&self, owner: &str, limit: usize) -> Result<Vec<ConversationSummary>> {
        // LIMIT takes a bigint; anything larger means "all of them".
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.conn()?
            .query(
                &format!(
                    "SELECT {CONVERSATION_COLUMNS}, \
                     (SELECT count(*) FROM chat_messages m WHERE m.conversation_id = c.id) \
                     FROM chat_conversations c WHERE c.owner = $1 \
                     ORDER BY c.updated_at DESC, c.created_at DESC, c.id COLLATE \"C\" \
                     LIMIT $2"
                ),
                &[&owner, &limit],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| {
                Ok(ConversationSummary {
                    conversation: conversation_from_row(r)?,
                    message_count: r.try_get(7).map_err(db_err)?,
                })
            })
            .collect()
    }

    fn conversation(&self, owner: &str, id: &str) -> Result<Option<ConversationRow>> {
        self.conn()?
            .query_opt(
                &format!(
                    "SELECT {CONVERSATION_COLUMNS} FROM chat_conversations c \
                     WHERE c.owner = $1 AND c.id = $2"
                ),
                &[&owner, &id],
            )
            .map_err(db_err)?
            .as_ref()
            .map(conversation_from_row)
            .transpose()
    }

    fn update_conversation(&self, c: &ConversationRow) -> Result<bool> {
        update_conversation(&mut *self.conn()?, c)
    }

    fn delete_conversation(&self, owner: &str, id: &str) -> Result<bool> {
        // Messages go with it (ON DELETE CASCADE).
        let n = self
            .conn()?
            .execute(
                "DELETE FROM chat_conversations WHERE owner = $1 AND id = $2",
                &[&owner, &id],
            )
            .map_err(db_err)?;
        Ok(n > 0)
    }

    fn append_message(&self, owner: &str, m: &ChatMessageRow) -> Result<i64> {
        self.write(|tx| append(tx, owner, m))
    }

    fn store_turn(
        &self,
        conversation: &ConversationRow,
        new: bool,
        messages: &[ChatMessageRow],
    ) -> Result<()> {
        self.write(|tx| {
            if new {
                insert_conversation(&mut **tx, conversation)?;
            } else if !update_conversation(&mut **tx, conversation)? {
                return Err(Error::NotFound(format!(
                    "conversation '{}' not found",
                    conversation.id
                )));
            }
            if messages.is_empty() {
                return Ok(());
            }
            for m in messages {
                append(tx, &conversation.owner, m)?;
            }
            Ok(())
        })
    }

    fn update_message(&self, owner: &str, m: &ChatMessageRow) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                "UPDATE chat_messages m SET content = $4, sources = $5, tool_calls = $6, \
                 status = $7, usage = $8 \
                 WHERE m.id = $2 AND m.conversation_id = $3 AND EXISTS ( \
                   SELECT 1 FROM chat_conversations c \
                   WHERE c.id = m.conversation_id AND c.owner = $1)",
                &[
                    &owner,
                    &m.id,
                    &m.conversation_id,
                    &m.content,
                    &m.sources,
                    &m.tool_calls,
                    &m.status,
                    &m.usage,
                ],
            )
            .map_err(db_err)?;
        Ok(n > 0)
    }

    fn messages(&self, owner: &str, conversation_id: &str) -> Result<Vec<ChatMessageRow>> {
        self.conn()?
            .query(
                &format!(
                    "SELECT {MESSAGE_COLUMNS} FROM chat_messages m \
                     JOIN chat_conversations c ON c.id = m.conversation_id \
                     WHERE c.owner = $1 AND m.conversation_id = $2 ORDER BY m.seq"
                ),
                &[&owner, &conversation_id],
            )
            .map_err(db_err)?
            .iter()
            .map(message_from_row)
            .collect()
    }
}

/// On a plain connection or in a transaction.
fn insert_conversation(
    client: &mut impl postgres::GenericClient,
    c: &ConversationRow,
) -> Result<()> {
    let n = client
        .execute(
            "INSERT INTO chat_conversations \
             (id, owner, title, kb_ids, model, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
            &[
                &c.id,
                &c.owner,
                &c.title,
                &c.kb_ids,
                &c.model,
                &c.created_at,
                &c.updated_at,
            ],
        )
        .map_err(db_err)?;
    if n == 0 {
        return Err(Error::Conflict(format!(
            "conversation '{}' already exists",
            c.id
        )));
    }
    Ok(())
}

fn update_conversation(
    client: &mut impl postgres::GenericClient,
    c: &ConversationRow,
) -> Result<bool> {
    let n = client
        .execute(
            "UPDATE chat_conversations SET title = $3, kb_ids = $4, model = $5 \
             WHERE owner = $1 AND id = $2",
            &[&c.owner, &c.id, &c.title, &c.kb_ids, &c.model],
        )
        .map_err(db_err)?;
    Ok(n > 0)
}

/// Moves `updated_at` and row-locks the conversation (see the module's note).
const APPEND_LOCK: &str =
    "UPDATE chat_conversations SET updated_at = $3 WHERE owner = $1 AND id = $2";
/// Inserts at the highest `seq` + 1, read after the lock was granted.
const APPEND_INSERT: &str = "INSERT INTO chat_messages (id, conversation_id, seq, role, content, \
     sources, tool_calls, status, usage, created_at) \
     SELECT $1::text, $2::text, COALESCE(max(seq), 0) + 1, $3::text, \
       $4::text, $5::text, $6::text, $7::text, $8::text, $9::bigint \
     FROM chat_messages WHERE conversation_id = $2::text \
     ON CONFLICT (id) DO NOTHING RETURNING seq::bigint";

/// Appends `m` inside `tx` (both statements kept on the connection, so a turn of several
/// messages prepares them at most once); returns its seq. The caller's transaction undoes
/// the `updated_at` move when the insert is refused.
fn append(tx: &mut crate::PgTransaction<'_>, owner: &str, m: &ChatMessageRow) -> Result<i64> {
    let n = tx
        .execute(APPEND_LOCK, &[&owner, &m.conversation_id, &m.created_at])
        .map_err(db_err)?;
    if n == 0 {
        // The same words whether the id is unknown or another owner's.
        return Err(Error::NotFound(format!(
            "conversation '{}' not found",
            m.conversation_id
        )));
    }
    let row = tx
        .query_opt(
            APPEND_INSERT,
            &[
                &m.id,
                &m.conversation_id,
                &m.role,
                &m.content,
                &m.sources,
                &m.tool_calls,
                &m.status,
                &m.usage,
                &m.created_at,
            ],
        )
        .map_err(|e| conflict_or_db(e, || format!("message '{}' already exists", m.id)))?
        .ok_or_else(|| Error::Conflict(format!("message '{}' already exists", m.id)))?;
    row.try_get(0).map_err(db_err)
}

fn conversation_from_row(r: &Row) -> Result<ConversationRow> {
    Ok(ConversationRow {
        id: r.try_get(0).map_err(db_err)?,
        owner: r.try_get(1).map_err(db_err)?,
        title: r.try_get(2).map_err(db_err)?,
        kb_ids: r.try_get(3).map_err(db_err)?,
        model: r.try_get(4).map_err(db_err)?,
        created_at: r.try_get(5).map_err(db_err)?,
        updated_at: r.try_get(6).map_err(db_err)?,
    })
}

fn message_from_row(r: &Row) -> Result<ChatMessageRow> {
    Ok(ChatMessageRow {
        id: r.try_get(0).map_err(db_err)?,
        conversation_id: r.try_get(1).map_err(db_err)?,
        seq: r.try_get(2).map_err(db_err)?,
        role: r.try_get(3).map_err(db_err)?,
        content: r.try_get(4).map_err(db_err)?,
        sources: r.try_get(5).map_err(db_err)?,
        tool_calls: r.try_get(6).map_err(db_err)?,
        status: r.try_get(7).map_err(db_err)?,
        usage: r.try_get(8).map_err(db_err)?,
        created_at: r.try_get(9).map_err(db_err)?,
    })
}
