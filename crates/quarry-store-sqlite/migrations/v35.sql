-- Version 35 (issue 68): wiki pages cite passages. A page is a knowledge entry (its versions
-- are the entry's supersede chain); `page_sources` keeps, per page version, each passage it
-- cites as it was when cited: the document's file (its public id, so a cited document that
-- goes leaves its citation behind), the line range and page, the hashes of the document and
-- of the passage, and the passage's text. A page is stale when a cited passage is no longer
-- in its document; that is read from these rows and the documents as they are now.
CREATE TABLE page_sources (
    page_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    file_uid TEXT NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    page INTEGER,
    document_sha256 TEXT NOT NULL,
    passage_sha256 TEXT NOT NULL,
    passage TEXT NOT NULL,
    PRIMARY KEY (page_id, position)
);
CREATE INDEX page_sources_file ON page_sources(file_uid);
