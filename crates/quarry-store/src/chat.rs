//! What chat keeps: each owner's conversations, and their messages with the sources cited
//! and the tool calls made. Every conversation belongs to one *owner* (a user's UUID, or
//! `local` for the machine's owner); messages belong to their conversation, so every query
//! reaches them through it and one owner can never read, change or count another's.
//!
//! The store does not interpret the JSON columns (`kb_ids`, `sources`, `tool_calls`,
//! `usage`) nor the `role` and `status` words; `quarry-chat` owns their shape.

use quarry_core::Result;

/// One conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRow {
    /// UUID.
    pub id: String,
    /// The owner's key (a user's UUID, or `local`).
    pub owner: String,
    /// Shown in the conversation list (from the first question unless renamed).
    pub title: String,
    /// JSON array: the knowledge bases the conversation searches.
    pub kb_ids: String,
    /// The model chosen for the conversation; `None`: the default.
    pub model: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds; the `created_at` of the latest message.
    pub updated_at: i64,
}

/// A conversation as listed, with how many messages it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSummary {
    /// The conversation.
    pub conversation: ConversationRow,
    /// Messages it holds.
    pub message_count: i64,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessageRow {
    /// UUID.
    pub id: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// Position in the conversation, from 1. Assigned by [`ChatStore::append_message`]
    /// (ignored on input), so concurrent appends never share a number.
    pub seq: i64,
    /// `user`, `assistant` or `system`.
    pub role: String,
    /// The text (Markdown for answers).
    pub content: String,
    /// JSON: the passages the answer cites.
    pub sources: String,
    /// JSON: the tool calls made while answering.
    pub tool_calls: String,
    /// `complete`, `interrupted` or `failed`.
    pub status: String,
    /// JSON: token usage, when the model reported it.
    pub usage: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// Chat's tables behind one trait, like everything the store keeps. Every method is scoped
/// to an owner: a conversation of another owner is treated exactly like one that does not
/// exist, so its existence never leaks.
pub trait ChatStore: Send + Sync {
    /// `Conflict` when the id exists.
    fn insert_conversation(&self, c: &ConversationRow) -> Result<()>;
    /// The owner's conversations, most recently updated first, at most `limit`.
    fn conversations(&self, owner: &str, limit: usize) -> Result<Vec<ConversationSummary>>;
    /// One of `owner`'s conversations; another owner's is `None`, like a missing one.
    fn conversation(&self, owner: &str, id: &str) -> Result<Option<ConversationRow>>;
    /// Sets title, kb_ids and model (`updated_at` stays: it follows the messages); false
    /// when the owner has no such conversation.
    fn update_conversation(&self, c: &ConversationRow) -> Result<bool>;
    /// Removes it with its messages; false when the owner has none such.
    fn delete_conversation(&self, owner: &str, id: &str) -> Result<bool>;
    /// Appends a message (seq = previous max + 1, in one immediate transaction) and sets the
    /// conversation's `updated_at` to the message's `created_at`; returns the seq.
    /// `NotFound` ("conversation '<id>' not found") when the owner has no such conversation,
    /// whether it exists for another owner or not; `Conflict` when the message id exists.
    fn append_message(&self, owner: &str, m: &ChatMessageRow) -> Result<i64>;
    /// Stores one chat turn in one transaction (one commit, so one disk flush before the
    /// answer starts): the conversation inserted when `new`, else its title, kb_ids and model
    /// updated (`NotFound` when `conversation.owner` has no such conversation), then
    /// `messages` appended in order as [`ChatStore::append_message`] would. All or nothing.
    fn store_turn(
        &self,
        conversation: &ConversationRow,
        new: bool,
        messages: &[ChatMessageRow],
    ) -> Result<()>;
    /// Replaces content, sources, tool_calls, status and usage of a stored message (the
    /// assistant's answer is written once at the start as `interrupted` and finished later,
    /// so a crash mid-answer leaves an honest record); false when the owner has no such
    /// message in `m.conversation_id`.
    fn update_message(&self, owner: &str, m: &ChatMessageRow) -> Result<bool>;
    /// The conversation's messages in seq order (empty when the owner has no such
    /// conversation).
    fn messages(&self, owner: &str, conversation_id: &str) -> Result<Vec<ChatMessageRow>>;
}
