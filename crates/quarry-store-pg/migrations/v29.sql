-- Version 29 (issue 46): an index on `kb_files.superseded_by`. Every read of a knowledge-base
-- file names the entry that superseded it (`FILE_SELECT`'s "which file has me as its
-- successor"): without an index that was a scan of every file per file read — a listing of
-- 600 files took 37 ms in that subquery alone, and each ingested file was read three times,
-- so an ingest grew quadratically with the knowledge base. Partial: only superseded
-- entries have the column.
CREATE INDEX kb_files_superseded_by ON kb_files(superseded_by) WHERE superseded_by IS NOT NULL;
