-- Version 37 (issue 69): insight for owners.
-- `search_log`: one row per search; `query` only when the administrator keeps query text,
-- and then only for searches that found nothing. `wording` groups similar questions.
-- `usage_daily` / `usage_people`: counts per UTC day and metric, by subject and by person and
-- token, added to by every node's audit writer; views read these, never the raw events.
CREATE TABLE search_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    space_id TEXT NOT NULL,
    knowledge_base TEXT NOT NULL,
    user_id TEXT NOT NULL,
    token_id TEXT NOT NULL,
    surface TEXT NOT NULL,
    results INTEGER NOT NULL,
    top_score REAL,
    unanswered INTEGER NOT NULL,
    wording TEXT NOT NULL,
    query TEXT
);
-- The unanswered view's group-by reads this index only.
CREATE INDEX search_log_unanswered ON search_log(space_id, unanswered, at, knowledge_base, wording);
-- A group's days, latest text and best score.
CREATE INDEX search_log_wording ON search_log(space_id, wording, unanswered, at, top_score);
CREATE INDEX search_log_at ON search_log(at);
-- Usage per day by what (a tool, a surface), and per day by whom: two tables, not one keyed by
-- both, so a view reads one row per day and subject, or per day and token, never their product.
CREATE TABLE usage_daily (
    space_id TEXT NOT NULL,
    day INTEGER NOT NULL,
    metric TEXT NOT NULL,
    subject TEXT NOT NULL,
    count INTEGER NOT NULL,
    total INTEGER NOT NULL,
    PRIMARY KEY (space_id, day, metric, subject)
) WITHOUT ROWID;
CREATE TABLE usage_people (
    space_id TEXT NOT NULL,
    day INTEGER NOT NULL,
    metric TEXT NOT NULL,
    user_id TEXT NOT NULL,
    token_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    total INTEGER NOT NULL,
    PRIMARY KEY (space_id, day, metric, user_id, token_id)
) WITHOUT ROWID;
