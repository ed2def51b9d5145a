-- Version 35 (issue 68): wiki pages cite passages (see the embedded store's v35.sql). A page
-- is a knowledge entry; `page_sources` keeps, per page version, each passage it cites as it
-- was when cited.
CREATE TABLE page_sources (
    page_id bigint NOT NULL,
    position integer NOT NULL,
    file_uid text NOT NULL,
    line_start integer NOT NULL,
    line_end integer NOT NULL,
    page integer,
    document_sha256 text NOT NULL,
    passage_sha256 text NOT NULL,
    passage text NOT NULL,
    PRIMARY KEY (page_id, position)
);
CREATE INDEX page_sources_file ON page_sources(file_uid);
