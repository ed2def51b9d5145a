-- Version 9: embedding is a job of its own, per collection (issue 22 item 4), so an ingest
-- job ends once the file is keyword-searchable.
ALTER TABLE jobs ADD COLUMN collection_id INTEGER;
CREATE INDEX IF NOT EXISTS jobs_kind_collection ON jobs(kind, collection_id, status);
