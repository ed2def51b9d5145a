-- Version 30 (issue 65): a token may be made with the management scope. Only such a token —
-- with every token of its chain made so and nothing narrowing it — manages governance
-- (policies, approvals, groups, roles and members, other chains' tokens, sources, the audit
-- log). Tokens made before keep working for everything else and manage nothing: a credential
-- never changes the guardrails that bind it, so the agent a policy governs cannot remove it.
-- Set once at creation and never updated, so the access generation's triggers need not
-- watch it.
ALTER TABLE access_tokens ADD COLUMN manage INTEGER NOT NULL DEFAULT 0;
