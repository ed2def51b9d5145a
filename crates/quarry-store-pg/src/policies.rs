//! [`quarry_store::PolicyStore`] on PostgreSQL: a decision and a use are each one conditional
//! `UPDATE … WHERE status = …`, so across nodes an approval is decided once and used once.

use postgres::Row;
use quarry_core::Result;
use quarry_store::{ApprovalDecision, ApprovalRow, PolicyRow, PolicyStore, approval_status};

use crate::error::{conflict_or_db, db_err};
use crate::pg_store::PgStore;

const POLICY_COLUMNS: &str =
    "id, space_id, name, attach, attach_id, rule, version, created_by, created_at, updated_at";

fn policy_from_row(r: &Row) -> std::result::Result<PolicyRow, postgres::Error> {
    Ok(PolicyRow {
        id: r.try_get("id")?,
        space_id: r.try_get("space_id")?,
        name: r.try_get("name")?,
        attach: r.try_get("attach")?,
        attach_id: r.try_get("attach_id")?,
        rule: r.try_get("rule")?,
        version: r.try_get("version")?,
        created_by: r.try_get("created_by")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

const APPROVAL_COLUMNS: &str = "id, space_id, tool, args_digest, arguments, caller_key, \
     requester_user_id, requester_name, requester_token_id, endpoint, policies, status, reason, \
     decided_by, decided_by_token_id, decided_at, used_at, created_at, expires_at";

fn approval_from_row(r: &Row) -> std::result::Result<ApprovalRow, postgres::Error> {
    Ok(ApprovalRow {
        id: r.try_get("id")?,
        space_id: r.try_get("space_id")?,
        tool: r.try_get("tool")?,
        args_digest: r.try_get("args_digest")?,
        arguments: r.try_get("arguments")?,
        caller_key: r.try_get("caller_key")?,
        requester_user_id: r.try_get("requester_user_id")?,
        requester_name: r.try_get("requester_name")?,
        requester_token_id: r.try_get("requester_token_id")?,
        endpoint: r.try_get("endpoint")?,
        policies: r.try_get("policies")?,
        status: r.try_get("status")?,
        reason: r.try_get("reason")?,
        decided_by: r.try_get("decided_by")?,
        decided_by_token_id: r.try_get("decided_by_token_id")?,
        decided_at: r.try_get("decided_at")?,
        used_at: r.try_get("used_at")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
    })
}

fn all<T>(
    rows: std::result::Result<Vec<Row>, postgres::Error>,
    read: fn(&Row) -> std::result::Result<T, postgres::Error>,
) -> Result<Vec<T>> {
    rows.map_err(db_err)?
        .iter()
        .map(|r| read(r).map_err(db_err))
        .collect()
}

fn one<T>(
    row: std::result::Result<Option<Row>, postgres::Error>,
    read: fn(&Row) -> std::result::Result<T, postgres::Error>,
) -> Result<Option<T>> {
    row.map_err(db_err)?
        .map(|r| read(&r).map_err(db_err))
        .transpose()
}

fn name_taken(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("a policy named '{name}' already exists in this space")
}

impl PolicyStore for PgStore {
    fn tool_policies(&self, space_id: &str) -> Result<Vec<PolicyRow>> {
        all(
            self.conn()?.query(
                &format!(
                    "SELECT {POLICY_COLUMNS} FROM tool_policies WHERE space_id = $1 \
                     ORDER BY name COLLATE \"C\""
                ),
                &[&space_id],
            ),
            policy_from_row,
        )
    }

    fn insert_tool_policy(&self, p: &PolicyRow) -> Result<()> {
        self.conn()?
            .execute(
                &format!(
                    "INSERT INTO tool_policies ({POLICY_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                ),
                &[
                    &p.id,
                    &p.space_id,
                    &p.name,
                    &p.attach,
                    &p.attach_id,
                    &p.rule,
                    &p.version,
                    &p.created_by,
                    &p.created_at,
                    &p.updated_at,
                ],
            )
            .map_err(|e| conflict_or_db(e, name_taken(&p.name)))?;
        Ok(())
    }

    fn update_tool_policy(&self, p: &PolicyRow) -> Result<Option<PolicyRow>> {
        let row = self
            .conn()?
            .query_opt(
                &format!(
                    "UPDATE tool_policies SET name = $3, attach = $4, attach_id = $5, rule = $6, \
                     version = version + 1, updated_at = $7 WHERE space_id = $1 AND id = $2 \
                     RETURNING {POLICY_COLUMNS}"
                ),
                &[
                    &p.space_id,
                    &p.id,
                    &p.name,
                    &p.attach,
                    &p.attach_id,
                    &p.rule,
                    &p.updated_at,
                ],
            )
            .map_err(|e| conflict_or_db(e, name_taken(&p.name)));
        match row {
            Ok(r) => one(Ok(r), policy_from_row),
            Err(e) => Err(e),
        }
    }

    fn delete_tool_policy(&self, space_id: &str, id: &str) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                "DELETE FROM tool_policies WHERE space_id = $1 AND id = $2",
                &[&space_id, &id],
            )
            .map_err(db_err)?;
        Ok(n > 0)
    }

    fn insert_approval(&self, a: &ApprovalRow) -> Result<()> {
        self.conn()?
            .execute(
                &format!(
                    "INSERT INTO tool_approvals ({APPROVAL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, \
                     $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
                ),
                &[
                    &a.id,
                    &a.space_id,
                    &a.tool,
                    &a.args_digest,
                    &a.arguments,
                    &a.caller_key,
                    &a.requester_user_id,
                    &a.requester_name,
                    &a.requester_token_id,
                    &a.endpoint,
                    &a.policies,
                    &a.status,
                    &a.reason,
                    &a.decided_by,
                    &a.decided_by_token_id,
                    &a.decided_at,
                    &a.used_at,
                    &a.created_at,
                    &a.expires_at,
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn approval(&self, space_id: &str, id: &str) -> Result<Option<ApprovalRow>> {
        one(
            self.conn()?.query_opt(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM tool_approvals WHERE space_id = $1 AND id = $2"
                ),
                &[&space_id, &id],
            ),
            approval_from_row,
        )
    }

    fn approvals(
        &self,
        space_id: &str,
        caller_key: Option<&str>,
        status: Option<&str>,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ApprovalRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        all(
            self.conn()?.query(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM tool_approvals WHERE space_id = $1 \
                     AND ($2::text IS NULL OR caller_key = $2) \
                     AND ($3::text IS NULL \
                          OR ($3 = 'expired' AND status IN ('pending', 'approved') AND expires_at <= $4) \
                          OR ($3 IN ('pending', 'approved') AND status = $3 AND expires_at > $4) \
                          OR ($3 IN ('denied', 'used') AND status = $3)) \
                     ORDER BY created_at DESC, id DESC LIMIT $5"
                ),
                &[&space_id, &caller_key, &status, &now, &limit],
            ),
            approval_from_row,
        )
    }

    fn open_approval(
        &self,
        space_id: &str,
        caller_key: &str,
        tool: &str,
        args_digest: &str,
        policies: &str,
        now: i64,
    ) -> Result<Option<ApprovalRow>> {
        one(
            self.conn()?.query_opt(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM tool_approvals WHERE space_id = $1 \
                     AND caller_key = $2 AND tool = $3 AND args_digest = $4 AND policies = $5 \
                     AND status <> 'used' AND expires_at > $6 \
                     ORDER BY created_at DESC, id DESC LIMIT 1"
                ),
                &[&space_id, &caller_key, &tool, &args_digest, &policies, &now],
            ),
            approval_from_row,
        )
    }

    fn decide_approval(
        &self,
        space_id: &str,
        id: &str,
        d: &ApprovalDecision<'_>,
    ) -> Result<Option<ApprovalRow>> {
        let status = if d.approve {
            approval_status::APPROVED
        } else {
            approval_status::DENIED
        };
        one(
            self.conn()?.query_opt(
                &format!(
                    "UPDATE tool_approvals SET status = $3, decided_by = $4, \
                     decided_by_token_id = $5, reason = $6, decided_at = $7 \
                     WHERE space_id = $1 AND id = $2 AND status = 'pending' AND expires_at > $7 \
                     RETURNING {APPROVAL_COLUMNS}"
                ),
                &[
                    &space_id,
                    &id,
                    &status,
                    &d.by,
                    &d.by_token_id,
                    &d.reason,
                    &d.at,
                ],
            ),
            approval_from_row,
        )
    }

    fn use_approval(&self, space_id: &str, id: &str, now: i64) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                "UPDATE tool_approvals SET status = 'used', used_at = $3 \
                 WHERE space_id = $1 AND id = $2 AND status = 'approved' AND expires_at > $3",
                &[&space_id, &id, &now],
            )
            .map_err(db_err)?;
        Ok(n == 1)
    }
}
