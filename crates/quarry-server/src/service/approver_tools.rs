//! The approver tools (`approvals` package): `list_approvals` and `decide_approval`, listed
//! only to callers who may decide (the space's admins and owners) and never offered to a
//! chat's model. A token never decides what its own chain asked for (`quarry_policy::decide`).

use quarry_core::now_millis;
use quarry_hub::BuiltinPackage;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations, object};
use serde_json::json;

use crate::auth::Caller;
use crate::http::run_blocking;
use crate::service::tool_args::{Args, read_only, tool_error, with_annotations};
use crate::state::AppState;

pub(crate) use quarry_hub::APPROVALS_PACKAGE;
const LIST: &str = "list_approvals";
const DECIDE: &str = "decide_approval";

/// The package, as the hub catalogs it.
pub(crate) fn package() -> BuiltinPackage {
    let list = with_annotations(
        Tool::new(
            LIST,
            "List tool calls held for a person's approval in this space (newest first): the tool, \
         the exact arguments, who asked, and until when. Pending ones by default.",
            object(json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["pending", "approved", "denied", "used", "expired"],
                               "description": "Which ones (default pending)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many (default 20)"}
                }
            })),
        ),
        read_only("List approvals"),
    );
    let decide = with_annotations(
        Tool::new(
            DECIDE,
            "Approve or deny one held tool call by its approval id. An approved call runs once, \
         when its caller retries it with exactly the same arguments.",
            object(json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The approval's id"},
                    "decision": {"type": "string", "enum": ["approve", "deny"]},
                    "reason": {"type": "string", "description": "Why (shown to the caller on a denial)"}
                },
                "required": ["id", "decision"]
            })),
        ),
        ToolAnnotations::with_title("Decide an approval")
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(false),
    );
    BuiltinPackage {
        id: APPROVALS_PACKAGE.into(),
        name: "Quarry approvals".into(),
        description: "Review and decide tool calls that wait for a person's approval".into(),
        category: "governance".into(),
        tags: vec!["approval".into(), "policy".into(), "governance".into()],
        tools: vec![list, decide],
    }
}

/// Whether `caller` is offered the approver tools.
pub(crate) fn usable_by(caller: &Caller) -> bool {
    quarry_policy::may_govern(&caller.principal)
}

/// Runs one approver tool.
pub(crate) async fn call(
    state: &AppState,
    caller: &Caller,
    name: &str,
    args: JsonObject,
) -> CallToolResult {
    let a = Args(&args);
    let gate = state.gate().clone();
    let p = caller.principal.clone();
    let now = now_millis();
    let answer = match name {
        LIST => {
            let status = match a.string("status") {
                Ok(s) => s.unwrap_or_else(|| "pending".into()),
                Err(m) => return tool_error(m),
            };
            let limit = match a.uint("limit") {
                Ok(l) => l.unwrap_or(20).clamp(1, 100) as usize,
                Err(m) => return tool_error(m),
            };
            run_blocking(move || {
                quarry_policy::list(gate.policies(), &p, Some(&status), limit, now).map(|rows| {
                    json!({"approvals": rows.iter().map(|r| quarry_policy::approval_json(r, now, &p)).collect::<Vec<_>>()})
                })
            })
            .await
        }
        DECIDE => {
            let (id, decision) = match (a.required_string("id"), a.required_string("decision")) {
                (Ok(id), Ok(d)) => (id, d),
                (Err(m), _) | (_, Err(m)) => return tool_error(m),
            };
            let approve = match decision.as_str() {
                "approve" => true,
                "deny" => false,
                other => {
                    return tool_error(format!(
                        "decision: expected \"approve\" or \"deny\", not '{other}'"
                    ));
                }
            };
            let reason = match a.string("reason") {
                Ok(r) => r,
                Err(m) => return tool_error(m),
            };
            state
                .write(move || {
                    quarry_policy::decide(gate.policies(), &p, &id, approve, reason.as_deref(), now)
                        .map(|row| quarry_policy::approval_json(&row, now, &p))
                })
                .await
        }
        other => return tool_error(format!("unknown approver tool '{other}'")),
    };
    match answer {
        Ok(v) => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(v.to_string())]);
            r.structured_content = Some(v);
            r
        }
        Err(e) => tool_error(e.detail),
    }
}
