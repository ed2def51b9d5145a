//! [`quarry_store::ChatStore`] on PostgreSQL.
#![allow(unused_variables)] // the methods still `pending` ignore their arguments

use super::*;

impl ChatStore for PgStore {
    fn insert_conversation(&self, c: &ConversationRow) -> Result<()> {
        Err(pending("insert_conversation"))
    }

    fn conversations(&self, owner: &str, limit: usize) -> Result<Vec<ConversationSummary>> {
        Err(pending("conversations"))
    }

    fn conversation(&self, owner: &str, id: &str) -> Result<Option<ConversationRow>> {
        Err(pending("conversation"))
    }

    fn update_conversation(&self, c: &ConversationRow) -> Result<bool> {
        Err(pending("update_conversation"))
    }

    fn delete_conversation(&self, owner: &str, id: &str) -> Result<bool> {
        Err(pending("delete_conversation"))
    }

    fn append_message(&self, owner: &str, m: &ChatMessageRow) -> Result<i64> {
        Err(pending("append_message"))
    }

    fn store_turn(
        &self,
        conversation: &ConversationRow,
        new: bool,
        messages: &[ChatMessageRow],
    ) -> Result<()> {
        Err(pending("store_turn"))
    }

    fn update_message(&self, owner: &str, m: &ChatMessageRow) -> Result<bool> {
        Err(pending("update_message"))
    }

    fn messages(&self, owner: &str, conversation_id: &str) -> Result<Vec<ChatMessageRow>> {
        Err(pending("messages"))
    }
}
