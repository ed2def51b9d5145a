-- Version 6: chat. Conversations belong to an owner (a user's UUID or `local`) and are
-- listed by last activity; messages belong to a conversation (and go with it), numbered by
-- `seq` within it. The JSON columns are opaque here: `quarry-chat` owns their shape.
CREATE TABLE IF NOT EXISTS chat_conversations (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    title TEXT NOT NULL,
    kb_ids TEXT NOT NULL,
    model TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chat_conversations_owner
    ON chat_conversations(owner, updated_at DESC);
CREATE TABLE IF NOT EXISTS chat_messages (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES chat_conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    sources TEXT NOT NULL,
    tool_calls TEXT NOT NULL,
    status TEXT NOT NULL,
    usage TEXT,
    created_at INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
);
