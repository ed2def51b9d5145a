//! [`PolicyStore`] on SQLite.

use quarry_core::Result;
use rusqlite::{OptionalExtension, params};

use crate::error::{conflict_or_db, db_err};
use crate::store::SqliteStore;
use quarry_store::{ApprovalDecision, ApprovalRow, PolicyRow, PolicyStore, approval_status};

const POLICY_COLUMNS: &str =
    "id, space_id, name, attach, attach_id, rule, version, created_by, created_at, updated_at";

fn policy_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PolicyRow> {
    Ok(PolicyRow {
        id: r.get(0)?,
        space_id: r.get(1)?,
        name: r.get(2)?,
        attach: r.get(3)?,
        attach_id: r.get(4)?,
        rule: r.get(5)?,
        version: r.get(6)?,
        created_by: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

const APPROVAL_COLUMNS: &str = "id, space_id, tool, args_digest, arguments, caller_key, \
     requester_user_id, requester_name, requester_token_id, endpoint, policies, status, reason, \
     decided_by, decided_by_token_id, decided_at, used_at, created_at, expires_at";

fn approval_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok(ApprovalRow {
        id: r.get(0)?,
        space_id: r.get(1)?,
        tool: r.get(2)?,
        args_digest: r.get(3)?,
        arguments: r.get(4)?,
        caller_key: r.get(5)?,
        requester_user_id: r.get(6)?,
        requester_name: r.get(7)?,
        requester_token_id: r.get(8)?,
        endpoint: r.get(9)?,
        policies: r.get(10)?,
        status: r.get(11)?,
        reason: r.get(12)?,
        decided_by: r.get(13)?,
        decided_by_token_id: r.get(14)?,
        decided_at: r.get(15)?,
        used_at: r.get(16)?,
        created_at: r.get(17)?,
        expires_at: r.get(18)?,
    })
}

fn name_taken(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("a policy named '{name}' already exists in this space")
}

impl PolicyStore for SqliteStore {
    fn tool_policies(&self, space_id: &str) -> Result<Vec<PolicyRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {POLICY_COLUMNS} FROM tool_policies WHERE space_id = ?1 ORDER BY name"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map([space_id], policy_from_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn insert_tool_policy(&self, p: &PolicyRow) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO tool_policies ({POLICY_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                ),
                params![
                    p.id,
                    p.space_id,
                    p.name,
                    p.attach,
                    p.attach_id,
                    p.rule,
                    p.version,
                    p.created_by,
                    p.created_at,
                    p.updated_at
                ],
            )
            .map_err(|e| conflict_or_db(e, name_taken(&p.name)))?;
            Ok(())
        })
    }

    fn update_tool_policy(&self, p: &PolicyRow) -> Result<Option<PolicyRow>> {
        self.write(|tx| {
            tx.query_row(
                &format!(
                    "UPDATE tool_policies SET name = ?3, attach = ?4, attach_id = ?5, rule = ?6, \
                     version = version + 1, updated_at = ?7 WHERE space_id = ?1 AND id = ?2 \
                     RETURNING {POLICY_COLUMNS}"
                ),
                params![
                    p.space_id,
                    p.id,
                    p.name,
                    p.attach,
                    p.attach_id,
                    p.rule,
                    p.updated_at
                ],
                policy_from_row,
            )
            .optional()
            .map_err(|e| conflict_or_db(e, name_taken(&p.name)))
        })
    }

    fn delete_tool_policy(&self, space_id: &str, id: &str) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM tool_policies WHERE space_id = ?1 AND id = ?2",
                    params![space_id, id],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn insert_approval(&self, a: &ApprovalRow) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO tool_approvals ({APPROVAL_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, \
                     ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"
                ),
                params![
                    a.id,
                    a.space_id,
                    a.tool,
                    a.args_digest,
                    a.arguments,
                    a.caller_key,
                    a.requester_user_id,
                    a.requester_name,
                    a.requester_token_id,
                    a.endpoint,
                    a.policies,
                    a.status,
                    a.reason,
                    a.decided_by,
                    a.decided_by_token_id,
                    a.decided_at,
                    a.used_at,
                    a.created_at,
                    a.expires_at
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn approval(&self, space_id: &str, id: &str) -> Result<Option<ApprovalRow>> {
        let conn = self.conn();
        conn.query_row(
            &format!(
                "SELECT {APPROVAL_COLUMNS} FROM tool_approvals WHERE space_id = ?1 AND id = ?2"
            ),
            params![space_id, id],
            approval_from_row,
        )
        .optional()
        .map_err(db_err)
    }

    fn approvals(
        &self,
        space_id: &str,
        caller_key: Option<&str>,
        status: Option<&str>,
        now: i64,
        limit: usize,
    ) -> Result<Vec<ApprovalRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM tool_approvals WHERE space_id = ?1 \
                 AND (?2 IS NULL OR caller_key = ?2) \
                 AND (?3 IS NULL \
                      OR (?3 = 'expired' AND status IN ('pending', 'approved') AND expires_at <= ?4) \
                      OR (?3 IN ('pending', 'approved') AND status = ?3 AND expires_at > ?4) \
                      OR (?3 IN ('denied', 'used') AND status = ?3)) \
                 ORDER BY created_at DESC, id DESC LIMIT ?5"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map(
                params![
                    space_id,
                    caller_key,
                    status,
                    now,
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                approval_from_row,
            )
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
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
        let conn = self.conn();
        conn.query_row(
            &format!(
                "SELECT {APPROVAL_COLUMNS} FROM tool_approvals WHERE space_id = ?1 \
                 AND caller_key = ?2 AND tool = ?3 AND args_digest = ?4 AND policies = ?5 \
                 AND status <> 'used' AND expires_at > ?6 \
                 ORDER BY created_at DESC, id DESC LIMIT 1"
            ),
            params![space_id, caller_key, tool, args_digest, policies, now],
            approval_from_row,
        )
        .optional()
        .map_err(db_err)
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
        self.write(|tx| {
            tx.query_row(
                &format!(
                    "UPDATE tool_approvals SET status = ?3, decided_by = ?4, \
                     decided_by_token_id = ?5, reason = ?6, decided_at = ?7 \
                     WHERE space_id = ?1 AND id = ?2 AND status = 'pending' AND expires_at > ?7 \
                     RETURNING {APPROVAL_COLUMNS}"
                ),
                params![space_id, id, status, d.by, d.by_token_id, d.reason, d.at],
                approval_from_row,
            )
            .optional()
            .map_err(db_err)
        })
    }

    fn use_approval(&self, space_id: &str, id: &str, now: i64) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE tool_approvals SET status = 'used', used_at = ?3 \
                     WHERE space_id = ?1 AND id = ?2 AND status = 'approved' AND expires_at > ?3",
                    params![space_id, id, now],
                )
                .map_err(db_err)?;
            Ok(n == 1)
        })
    }
}
