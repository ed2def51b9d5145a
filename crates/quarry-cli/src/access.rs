//! `quarry user|space|group|token …`: the CLI owns the data directory, so it is the
//! administrator of principals (a server only lets a token holder manage its own tokens).

use std::io::Write;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use quarry_access::{Directory, Role, TokenRecord, TokenRequest};
use quarry_core::Scope;
use quarry_engine::{Engine, NoProgress};
use serde_json::json;

use crate::output::print_json;

#[derive(Subcommand)]
pub(crate) enum UserCmd {
    /// Add a user (lowercase letters, digits, '-', '_', '.').
    Add { name: String },
    /// List users and the spaces they belong to.
    #[command(alias = "ls")]
    List,
    /// Remove a user, its memberships and its tokens.
    #[command(alias = "remove")]
    Rm { name: String },
}

#[derive(Subcommand)]
pub(crate) enum SpaceCmd {
    /// Create a space (a tenant with its own knowledge bases); prints its UUID.
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List spaces with their UUIDs and members.
    #[command(alias = "ls")]
    List,
    /// Remove a space and everything in it (knowledge bases, documents, memberships).
    #[command(alias = "remove")]
    Rm {
        name: String,
        /// Required: removing a space deletes its documents.
        #[arg(long)]
        yes: bool,
    },
    /// Give a user a role in a space: owner, admin, editor or viewer.
    Grant {
        space: String,
        user: String,
        #[arg(long, default_value = "viewer")]
        role: String,
    },
    /// Take a user out of a space.
    Revoke { space: String, user: String },
}

#[derive(Subcommand)]
pub(crate) enum GroupCmd {
    /// Create a group of users in the space (--space, default `default`); documents' readers
    /// name it `group:NAME`.
    Create {
        /// Letters, digits, '-', '_' or '.' (64 at most), unique in the space.
        name: String,
        /// What the group is for, in words.
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List the space's groups with their members.
    #[command(alias = "ls")]
    List,
    /// Delete a group (by name or UUID); its members stay in the space.
    #[command(alias = "rm")]
    Delete {
        /// The group's name or UUID.
        name: String,
    },
    /// Put users (members of the space) in a group; one already in it stays.
    Add {
        /// The group's name or UUID.
        name: String,
        /// User names or UUIDs.
        #[arg(required = true, num_args = 1..)]
        users: Vec<String>,
    },
    /// Take users out of a group.
    Remove {
        /// The group's name or UUID.
        name: String,
        /// User names or UUIDs.
        #[arg(required = true, num_args = 1..)]
        users: Vec<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum TokenCmd {
    /// Create an access token; the token is printed once and stored only as a hash.
    Create {
        /// Whose token it is.
        #[arg(long)]
        user: String,
        /// What it is for, e.g. "MCP - Claude Code".
        #[arg(long, default_value = "")]
        label: String,
        /// Spaces it may use (name or UUID, comma-separated). Default: the global --space
        /// when given, else all the user's spaces.
        #[arg(long = "spaces", value_delimiter = ',')]
        spaces: Vec<String>,
        /// Only these knowledge bases (name or id; repeat or comma-separate).
        #[arg(long = "kb", value_delimiter = ',')]
        kbs: Vec<String>,
        /// Read only: search and read, never write; of hub tools, only those annotated
        /// read-only (and those named one by one in --tools).
        #[arg(long)]
        read_only: bool,
        /// Only these hub packages or tools (`time`, `git.git_status`; repeat or
        /// comma-separate), as `quarry hub catalog` names them. Default: every tool.
        #[arg(long = "tools", value_delimiter = ',')]
        tools: Vec<String>,
        /// Expiry: `30d`, `12h`, `90m`, or a date `2027-01-31` (UTC). Default: never.
        #[arg(long)]
        expires: Option<String>,
        /// Only at this named tool endpoint (`/mcp/e/NAME`): the token works there and
        /// nowhere else, and sees what the endpoint selects as it changes.
        #[arg(long, value_name = "NAME")]
        endpoint: Option<String>,
        /// The management scope: the token may also manage governance — policies,
        /// approvals, groups, roles and members, other tokens, sources, the audit log — as far
        /// as the user's role allows. For a person's scripts, never an agent: a token without
        /// it cannot change the guardrails that bind it. Not with --kb, --tools or --endpoint.
        #[arg(long)]
        manage: bool,
    },
    /// List tokens (never the secrets).
    #[command(alias = "ls")]
    List {
        /// Only this user's.
        #[arg(long)]
        user: Option<String>,
    },
    /// Revoke a token by id or prefix; open MCP sessions lose access on their next request.
    Revoke { id: String },
}

/// `quarry audit`: the machine's owner reads the log straight from the store.
#[derive(clap::Args)]
pub(crate) struct AuditArgs {
    /// Only this action (`tool.call`, `search`, `write`, `signin`, `auth.failure`; `tool`
    /// covers `tool.call`).
    #[arg(long)]
    action: Option<String>,
    /// Only this user's (name or UUID).
    #[arg(long)]
    user: Option<String>,
    /// Only this token's (UUID).
    #[arg(long)]
    token: Option<String>,
    /// Only `ok`, `error` or `denied`.
    #[arg(long)]
    outcome: Option<String>,
    /// Only events since: `30d`, `12h`, `90m` ago, or a date `2027-01-31` (UTC).
    #[arg(long)]
    since: Option<String>,
    /// At most this many events.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// JSON lines, one event each (an export).
    #[arg(long)]
    jsonl: bool,
}

pub(crate) fn audit(
    engine: &Engine,
    args: &AuditArgs,
    json_out: bool,
    space: Option<&str>,
) -> Result<()> {
    let dir = Directory::new(engine.store_handle());
    // The global --space narrows to one space; without it, every space and the refusals
    // outside any.
    let space_id = space.map(|s| dir.space(s).map(|s| s.id)).transpose()?;
    let user_id = args
        .user
        .as_deref()
        .map(|u| dir.user(u).map(|u| u.id))
        .transpose()?;
    if let Some(o) = args.outcome.as_deref()
        && ![quarry_audit::OK, quarry_audit::ERROR, quarry_audit::DENIED].contains(&o)
    {
        bail!("--outcome must be ok, error or denied, not {o:?}");
    }
    let since = match args.since.as_deref() {
        None => None,
        // "30d" means 30 days ago here (parse_expiry adds to now).
        Some(s) if s.ends_with(['d', 'h', 'm']) => {
            let ahead = parse_expiry(s)?;
            Some(2 * quarry_core::now_millis() - ahead)
        }
        Some(s) => Some(parse_expiry(s)?),
    };
    let events = engine
        .store_handle()
        .audit_events(&quarry_audit::AuditQuery {
            space_id,
            action: args.action.clone(),
            user_id,
            token_id: args.token.clone(),
            outcome: args.outcome.clone(),
            since,
            until: None,
            before_id: None,
            limit: args.limit,
        })?;
    let mut out = std::io::stdout().lock();
    if args.jsonl {
        for e in &events {
            serde_json::to_writer(&mut out, e)?;
            writeln!(out)?;
        }
        return Ok(());
    }
    if json_out {
        return print_json(&events);
    }
    if events.is_empty() {
        writeln!(out, "No audit events.")?;
    }
    for r in &events {
        let e = &r.event;
        writeln!(
            out,
            "{}  {:<6} {:<12} {:<10} {}{}",
            quarry_core::iso8601_millis(e.at),
            e.outcome,
            e.action,
            e.user_name.as_deref().unwrap_or("-"),
            e.target,
            e.duration_ms
                .map(|ms| format!("  {ms} ms"))
                .unwrap_or_default(),
        )?;
    }
    Ok(())
}

/// `30d`, `12h`, `90m` → now + that; `YYYY-MM-DD` → that day, 00:00 UTC. Milliseconds.
fn parse_expiry(s: &str) -> Result<i64> {
    let s = s.trim();
    let unit = |c: char| -> Option<i64> {
        match c {
            'd' => Some(86_400_000),
            'h' => Some(3_600_000),
            'm' => Some(60_000),
            _ => None,
        }
    };
    if let Some(last) = s.chars().last()
        && let Some(ms) = unit(last)
        && let Ok(n) = s[..s.len() - 1].parse::<i64>()
        && n > 0
    {
        return Ok(quarry_core::now_millis().saturating_add(n.saturating_mul(ms)));
    }
    let parts: Vec<&str> = s.split('-').collect();
    if let [y, m, d] = parts.as_slice()
        && let (Ok(y), Ok(m), Ok(d)) = (y.parse::<i64>(), m.parse::<i64>(), d.parse::<i64>())
        && (1..=12).contains(&m)
        && (1..=31).contains(&d)
    {
        return Ok(quarry_core::days_from_civil(y, m, d) * 86_400_000);
    }
    bail!("invalid --expires {s:?}: use 30d, 12h, 90m or a date like 2027-01-31")
}

fn when(ms: Option<i64>) -> String {
    ms.map_or_else(|| "-".to_owned(), quarry_core::iso8601_millis)
}

/// What a token may do with data: read-only when it says so, or when its user is a viewer
/// in every space it names (the role caps what a token can do).
fn token_access(t: &TokenRecord, memberships: &[quarry_access::Membership]) -> &'static str {
    let viewer_only = memberships
        .iter()
        .filter(|m| m.user == t.user && t.spaces.contains(&m.space_id))
        .all(|m| m.role == Role::Viewer);
    if t.read_only || viewer_only {
        "read-only"
    } else {
        "read-write"
    }
}

fn token_line(t: &TokenRecord, memberships: &[quarry_access::Membership]) -> String {
    let state = if t.revoked_at.is_some() {
        "revoked".to_owned()
    } else if t
        .expires_at
        .is_some_and(|at| at <= quarry_core::now_millis())
    {
        "expired".to_owned()
    } else {
        "active".to_owned()
    };
    format!(
        "{}  {}…  {:<10} {:<8} {}{}  label={:?}  expires={}  last_used={}",
        t.id,
        t.prefix,
        t.user,
        state,
        token_access(t, memberships),
        t.collections
            .as_ref()
            .map(|c| format!(" kb={}", c.len()))
            .unwrap_or_default()
            + &t.tools
                .as_ref()
                .map(|t| format!(" tools={}", t.join(",")))
                .unwrap_or_default()
            + if t.manage { " manage" } else { "" },
        t.label,
        when(t.expires_at),
        when(t.last_used_at),
    )
}

pub(crate) fn user(engine: &Engine, cmd: &UserCmd, json_out: bool) -> Result<()> {
    let dir = Directory::new(engine.store_handle());
    let mut out = std::io::stdout().lock();
    match cmd {
        UserCmd::Add { name } => {
            let u = dir.create_user(name)?;
            if json_out {
                return print_json(&u);
            }
            writeln!(out, "Added user '{}' ({})", u.name, u.id)?;
        }
        UserCmd::List => {
            let users = dir.users()?;
            let members = dir.memberships(None)?;
            if json_out {
                let list: Vec<_> = users
                    .iter()
                    .map(|u| {
                        let spaces: Vec<_> = members
                            .iter()
                            .filter(|m| m.user == u.name)
                            .map(|m| json!({"space": m.space, "space_id": m.space_id, "role": m.role}))
                            .collect();
                        json!({"id": u.id, "name": u.name, "created_at": u.created_at, "spaces": spaces})
                    })
                    .collect();
                return print_json(&list);
            }
            if users.is_empty() {
                writeln!(out, "No users. Add one with: quarry user add NAME")?;
            }
            for u in &users {
                let spaces: Vec<String> = members
                    .iter()
                    .filter(|m| m.user == u.name)
                    .map(|m| format!("{}:{}", m.space, m.role.as_str()))
                    .collect();
                writeln!(out, "{}  {}  {}", u.name, u.id, spaces.join(" "))?;
            }
        }
        UserCmd::Rm { name } => {
            let u = dir.delete_user(name)?;
            if json_out {
                return print_json(&json!({"removed": u}));
            }
            writeln!(out, "Removed user '{}' and its tokens", u.name)?;
        }
    }
    Ok(())
}

pub(crate) fn space(engine: &Engine, cmd: &SpaceCmd, json_out: bool) -> Result<()> {
    let dir = Directory::new(engine.store_handle());
    let mut out = std::io::stdout().lock();
    match cmd {
        SpaceCmd::Create { name, description } => {
            let s = dir.create_space(name, description)?;
            if json_out {
                return print_json(&s);
            }
            writeln!(out, "Created space '{}' ({})", s.name, s.id)?;
        }
        SpaceCmd::List => {
            dir.default_space()?;
            let spaces = dir.spaces()?;
            let members = dir.memberships(None)?;
            if json_out {
                let list: Vec<_> = spaces
                    .iter()
                    .map(|s| {
                        let m: Vec<_> = members
                            .iter()
                            .filter(|m| m.space == s.name)
                            .map(|m| json!({"user": m.user, "role": m.role}))
                            .collect();
                        json!({"id": s.id, "name": s.name, "description": s.description, "created_at": s.created_at, "members": m})
                    })
                    .collect();
                return print_json(&list);
            }
            for s in &spaces {
                let m: Vec<String> = members
                    .iter()
                    .filter(|m| m.space == s.name)
                    .map(|m| format!("{}:{}", m.user, m.role.as_str()))
                    .collect();
                writeln!(out, "{}  {}  {}", s.name, s.id, m.join(" "))?;
            }
        }
        SpaceCmd::Rm { name, yes } => {
            let s = dir.space(name)?;
            if !yes {
                bail!(
                    "removing space '{}' deletes all its knowledge bases and documents; run again with --yes",
                    s.name
                );
            }
            if s.name == quarry_core::DEFAULT_SPACE {
                bail!("the default space cannot be removed");
            }
            let inside = engine.scoped(Scope::owner(s.name.clone()));
            for c in inside.collections()? {
                inside.remove_collection(&c.name, &NoProgress)?;
            }
            inside.cleanup(&NoProgress)?;
            dir.delete_space(&s.name)?;
            if json_out {
                return print_json(&json!({"removed": s}));
            }
            writeln!(out, "Removed space '{}'", s.name)?;
        }
        SpaceCmd::Grant { space, user, role } => {
            let role = Role::parse(role).with_context(|| {
                format!("invalid --role {role:?}: use owner, admin, editor or viewer")
            })?;
            let m = dir.grant(user, space, role)?;
            if json_out {
                return print_json(&m);
            }
            writeln!(
                out,
                "'{}' is now {} of space '{}'",
                m.user,
                m.role.as_str(),
                m.space
            )?;
        }
        SpaceCmd::Revoke { space, user } => {
            dir.revoke_membership(user, space)?;
            if json_out {
                return print_json(&json!({"revoked": true}));
            }
            writeln!(out, "'{user}' is no longer a member of space '{space}'")?;
        }
    }
    Ok(())
}

fn members_text(members: &[String]) -> String {
    if members.is_empty() {
        "no members".to_owned()
    } else {
        members.join(", ")
    }
}

/// The space `--space` names (the default space without it) and the machine's owner in
/// it: who the CLI acts as for a space's groups, policies and approvals.
pub(crate) fn cli_space(
    dir: &Directory,
    engine: &Engine,
) -> Result<(quarry_access::Space, quarry_core::Principal)> {
    let space = if engine.space() == quarry_core::DEFAULT_SPACE {
        dir.default_space()?
    } else {
        dir.space(engine.space())?
    };
    let owner = quarry_access::owner_principal(&space);
    Ok((space, owner))
}

pub(crate) fn group(engine: &Engine, cmd: &GroupCmd, json_out: bool) -> Result<()> {
    let dir = Directory::new(engine.store_handle());
    let (space, owner) = cli_space(&dir, engine)?;
    let mut out = std::io::stdout().lock();
    match cmd {
        GroupCmd::Create { name, description } => {
            let g = dir.create_group_as(&owner, &space.id, name, description)?;
            if json_out {
                return print_json(&g);
            }
            writeln!(
                out,
                "Created group '{}' in space '{}' ({})",
                g.name, space.name, g.id
            )?;
        }
        GroupCmd::List => {
            let (_, groups) = dir.groups_as(&owner, &space.id)?;
            if json_out {
                return print_json(&groups);
            }
            if groups.is_empty() {
                writeln!(
                    out,
                    "No groups in space '{}'. Create one with: quarry group create NAME",
                    space.name
                )?;
            }
            for g in &groups {
                writeln!(out, "{}  {}  {}", g.name, g.id, g.members.join(" "))?;
            }
        }
        GroupCmd::Delete { name } => {
            let g = dir.delete_group_as(&owner, &space.id, name)?;
            if json_out {
                return print_json(&json!({"deleted": g}));
            }
            writeln!(out, "Deleted group '{}' of space '{}'", g.name, space.name)?;
        }
        GroupCmd::Add { name, users } | GroupCmd::Remove { name, users } => {
            let g = if matches!(cmd, GroupCmd::Add { .. }) {
                dir.add_group_members_as(&owner, &space.id, name, users)?
            } else {
                dir.remove_group_members_as(&owner, &space.id, name, users)?
            };
            if json_out {
                return print_json(&g);
            }
            writeln!(
                out,
                "Group '{}' of space '{}': {}",
                g.name,
                space.name,
                members_text(&g.members)
            )?;
        }
    }
    Ok(())
}

pub(crate) fn token(
    engine: &Engine,
    cmd: &TokenCmd,
    json_out: bool,
    space: Option<&str>,
    env: &crate::config::Env,
) -> Result<()> {
    let dir = Directory::new(engine.store_handle());
    let mut out = std::io::stdout().lock();
    match cmd {
        TokenCmd::Create {
            user,
            label,
            spaces,
            kbs,
            read_only,
            tools,
            expires,
            endpoint,
            manage,
        } => {
            let expires_at = expires.as_deref().map(parse_expiry).transpose()?;
            let endpoint = match endpoint {
                Some(name) => Some(
                    engine
                        .store_handle()
                        .tool_endpoint(&dir.endpoint_owners(user)?, name)?
                        .with_context(|| {
                            format!("no tool endpoint '{name}' (see GET /api/v1/endpoints)")
                        })?
                        .id,
                ),
                None => None,
            };
            let tools = if tools.is_empty() {
                None
            } else {
                let owner = dir.user(user)?.id;
                let scope = quarry_access::normalize_tool_scope(tools)?;
                // The catalog the server would show this user (built-in web search included
                // when configured), read from the store; nothing is connected.
                let hub = quarry_hub::Hub::new(
                    engine.store_handle(),
                    vec![quarry_server::knowledge_package()],
                    quarry_hub::HubOptions {
                        web: crate::settings::web_search(env)?,
                        ..Default::default()
                    },
                );
                hub.check_tool_scope(&owner, &scope)?;
                Some(scope)
            };
            let issued = dir.create_token(&TokenRequest {
                user: user.clone(),
                label: label.clone(),
                spaces: if spaces.is_empty() {
                    space.map(|s| vec![s.to_owned()]).unwrap_or_default()
                } else {
                    spaces.clone()
                },
                collections: (!kbs.is_empty()).then(|| kbs.clone()),
                read_only: *read_only,
                tools,
                endpoint,
                expires_at,
                parent: None,
                manage: *manage,
            })?;
            if json_out {
                return print_json(&issued);
            }
            writeln!(out, "{}", issued.token)?;
            eprintln!(
                "Token {} for '{}' created. It is shown only this once: store it now.",
                issued.record.id, issued.record.user
            );
        }
        TokenCmd::List { user } => {
            let tokens = dir.tokens(user.as_deref())?;
            if json_out {
                return print_json(&tokens);
            }
            if tokens.is_empty() {
                writeln!(out, "No tokens.")?;
            }
            let memberships = dir.memberships(user.as_deref())?;
            for t in &tokens {
                writeln!(out, "{}", token_line(t, &memberships))?;
            }
        }
        TokenCmd::Revoke { id } => {
            dir.revoke_token(id, None)?;
            if json_out {
                return print_json(&json!({"revoked": id}));
            }
            writeln!(out, "Revoked token {id}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_forms() {
        let now = quarry_core::now_millis();
        let d = parse_expiry("30d").unwrap();
        assert!((d - now - 30 * 86_400_000).abs() < 5_000);
        assert_eq!(parse_expiry("1970-01-02").unwrap(), 86_400_000);
        assert_eq!(parse_expiry("2000-03-01").unwrap(), 951_868_800_000);
        for bad in ["", "0d", "-3d", "30x", "2027-13-01", "tomorrow"] {
            assert!(parse_expiry(bad).is_err(), "{bad}");
        }
    }
}
