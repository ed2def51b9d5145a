-- Version 12: fencing tokens. Every claim of a job bumps its token, and a job's side
-- effects apply only while the token they present is the job's (issue 24).
ALTER TABLE jobs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
