-- Version 20 (issue 43): folder sources that sync on change. `watch` = 1: every server node
-- on whose machine the folder exists watches it through the OS's file notifications, syncs
-- it in full when it starts watching (and after lost events), and syncs only the changed
-- paths on each change; `interval_ms` still schedules full syncs beside it, if set.
ALTER TABLE sources ADD COLUMN watch INTEGER NOT NULL DEFAULT 0;
