-- Version 20 (issue 43): folder sources that sync on change. `watch`: every server node on
-- whose machine the folder exists watches it through the OS's file notifications, syncs it
-- in full when it starts watching (and after lost events), and syncs only the changed paths
-- on each change; `interval_ms` still schedules full syncs beside it, if set.
ALTER TABLE sources ADD COLUMN watch boolean NOT NULL DEFAULT false;
-- A sync of a few changed paths reads the documents at or under each path: a range of
-- paths in byte order, whatever the database's collation.
CREATE INDEX kb_files_source_path_c ON kb_files (source_id, source_path COLLATE "C")
    WHERE source_id IS NOT NULL;
