//! `quarry policy` (tool policies of a space) and `quarry approvals` (held tool calls), as
//! the machine's owner of the space `--space` names. The rules are `quarry-policy`'s, the
//! same the REST routes and the approver tools apply; a decision made here is in the audit
//! log like one made over REST.

use std::io::Write;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use quarry_access::Directory;
use quarry_core::{Principal, now_millis};
use quarry_engine::Engine;
use serde_json::Value;

use crate::output::print_json;

#[derive(Subcommand, Debug)]
pub(crate) enum PolicyCmd {
    /// List the space's tool policies.
    List,
    /// Show one policy (id or name).
    Show { policy: String },
    /// Add a policy from JSON (docs/policies.md): `{"name", "tools", "effect", "when"?,
    /// "applies_to"?, "approval_ttl_secs"?}`; `-` reads it from stdin.
    Add {
        /// The policy as JSON, or `-` for stdin, or `@FILE`.
        #[arg(value_name = "JSON")]
        body: String,
    },
    /// Change a policy (id or name): the JSON's fields replace its own; its version grows.
    Set {
        policy: String,
        /// The fields as JSON, or `-` for stdin, or `@FILE`.
        #[arg(value_name = "JSON")]
        body: String,
    },
    /// Remove a policy (id or name).
    Remove { policy: String },
}

#[derive(Subcommand, Debug)]
pub(crate) enum ApprovalCmd {
    /// List held calls, newest first (pending by default).
    List {
        /// pending, approved, denied, used, expired or all.
        #[arg(long, default_value = "pending")]
        status: String,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Show one approval with the call's exact arguments.
    Show { id: String },
    /// Approve a pending call: its caller's retry with the same arguments runs once.
    Approve {
        id: String,
        /// Why (kept with the decision).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny a pending call.
    Deny {
        id: String,
        /// Why (the caller is told).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// The machine's owner in the space `--space` names.
fn owner(engine: &Engine) -> Result<Principal> {
    let dir = Directory::new(engine.store_handle());
    Ok(crate::access::cli_space(&dir, engine)?.1)
}

/// A JSON argument: inline, `-` (stdin) or `@FILE`.
fn read_json(arg: &str) -> Result<Value> {
    let text = match arg {
        "-" => std::io::read_to_string(std::io::stdin()).context("reading stdin")?,
        s if s.starts_with('@') => {
            std::fs::read_to_string(&s[1..]).with_context(|| format!("reading {}", &s[1..]))?
        }
        s => s.to_owned(),
    };
    serde_json::from_str(&text).context("the policy is not valid JSON")
}

pub(crate) fn policy(engine: &Engine, cmd: &PolicyCmd, json_out: bool) -> Result<()> {
    let p = owner(engine)?;
    let handle = engine.store_handle();
    let store = handle.as_ref();
    let now = now_millis();
    let shown = match cmd {
        PolicyCmd::List => {
            let all = quarry_policy::policies(store, &p)?;
            if json_out {
                let v: Vec<Value> = all.iter().map(quarry_policy::Policy::to_json).collect();
                return print_json(&v);
            }
            let mut out = std::io::stdout().lock();
            if all.is_empty() {
                writeln!(out, "No tool policies in this space.")?;
            }
            for x in &all {
                writeln!(
                    out,
                    "{}  v{}  {}  {}",
                    x.name,
                    x.version,
                    attach(&x.applies_to),
                    x.summary()
                )?;
            }
            return Ok(());
        }
        PolicyCmd::Show { policy } => quarry_policy::policy(store, &p, policy)?,
        PolicyCmd::Add { body } => quarry_policy::create_policy(store, &p, &read_json(body)?, now)?,
        PolicyCmd::Set { policy, body } => {
            quarry_policy::update_policy(store, &p, policy, &read_json(body)?, now)?
        }
        PolicyCmd::Remove { policy } => {
            let gone = quarry_policy::delete_policy(store, &p, policy)?;
            if json_out {
                return print_json(
                    &serde_json::json!({"deleted": true, "id": gone.id, "name": gone.name}),
                );
            }
            println!("Removed policy {}.", gone.name);
            return Ok(());
        }
    };
    if json_out {
        return print_json(&shown.to_json());
    }
    println!(
        "{} (v{}, {}): {}",
        shown.name,
        shown.version,
        attach(&shown.applies_to),
        shown.summary()
    );
    Ok(())
}

fn attach(a: &quarry_policy::AppliesTo) -> String {
    match a {
        quarry_policy::AppliesTo::Space => "the space".into(),
        quarry_policy::AppliesTo::Endpoint(e) => format!("endpoint {e}"),
        quarry_policy::AppliesTo::Token(t) => format!("token {t}"),
    }
}

pub(crate) fn approvals(engine: &Engine, cmd: &ApprovalCmd, json_out: bool) -> Result<()> {
    let p = owner(engine)?;
    let handle = engine.store_handle();
    let store: &dyn quarry_store::PolicyStore = handle.as_ref();
    let now = now_millis();
    let row = match cmd {
        ApprovalCmd::List { status, limit } => {
            if *limit == 0 {
                bail!("--limit must be at least 1");
            }
            let status = (status != "all").then_some(status.as_str());
            let rows = quarry_policy::list(store, &p, status, *limit, now)?;
            if json_out {
                let v: Vec<Value> = rows
                    .iter()
                    .map(|r| quarry_policy::approval_json(r, now, &p))
                    .collect();
                return print_json(&v);
            }
            let mut out = std::io::stdout().lock();
            if rows.is_empty() {
                writeln!(out, "No approvals.")?;
            }
            for r in &rows {
                writeln!(
                    out,
                    "{}  {:8}  {}  by {}  {}",
                    r.id,
                    quarry_policy::shown_status(r, now),
                    r.tool,
                    r.requester_name.as_deref().unwrap_or("local"),
                    r.arguments
                )?;
            }
            return Ok(());
        }
        ApprovalCmd::Show { id } => store
            .approval(&p.space_id, id)?
            .with_context(|| format!("no approval '{id}' in this space"))?,
        ApprovalCmd::Approve { id, reason } | ApprovalCmd::Deny { id, reason } => {
            let approve = matches!(cmd, ApprovalCmd::Approve { .. });
            let row = quarry_policy::decide(store, &p, id, approve, reason.as_deref(), now)?;
            // The decision's line of the approval's receipt.
            let mut e = quarry_audit::event(
                Some(&p),
                quarry_audit::WRITE,
                "cli approvals decide",
                quarry_audit::OK,
            );
            e.detail = serde_json::json!({
                "approval_id": row.id,
                "decision": row.status,
                "tool": row.tool,
            })
            .to_string();
            handle.append_audit(&[e])?;
            row
        }
    };
    if json_out {
        return print_json(&quarry_policy::approval_json(&row, now, &p));
    }
    let v = quarry_policy::approval_json(&row, now, &p);
    println!(
        "{}  {}  {}\narguments: {}\nrequested by {} at {}, expires {}",
        row.id,
        v["status"].as_str().unwrap_or_default(),
        row.tool,
        row.arguments,
        row.requester_name.as_deref().unwrap_or("local"),
        v["created_at"].as_str().unwrap_or_default(),
        v["expires_at"].as_str().unwrap_or_default(),
    );
    if let Some(by) = &row.decided_by {
        println!(
            "decided by {by}{}",
            row.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    Ok(())
}
