//! Spaces, their members and roles, and users, over REST (the web UI's Access page; see
//! docs/access-api.md). Handlers translate; the rules (who sees which space, who may change
//! what, the last owner) live in `quarry_access::Directory`'s `*_as` methods. Changes go
//! through the server's write queue, so a rule checked before a write still holds when it
//! runs (two admins cannot each remove "the other" last owner).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, put};
use quarry_access::parse_role;
use quarry_core::{Error, Scope};
use quarry_engine::NoProgress;
use serde::Deserialize;
use serde_json::json;

use crate::auth::Caller;
use crate::http::{ApiError, Body, ok, ok_list, run_blocking};
use crate::state::AppState;

/// Mounted under the Account surface: a token with several spaces needs to name none.
pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/spaces", get(list_spaces).post(create_space))
        .route("/api/v1/spaces/{id}", get(get_space).delete(delete_space))
        .route("/api/v1/spaces/{id}/members", get(list_members))
        .route(
            "/api/v1/spaces/{id}/members/{user}",
            put(set_member).delete(remove_member),
        )
        .route("/api/v1/spaces/{id}/sessions", get(list_sessions))
        .route(
            "/api/v1/spaces/{id}/sessions/{session}",
            delete(end_session),
        )
        .route("/api/v1/users", get(list_users).post(create_user))
}

/// `GET /api/v1/spaces`: the spaces the caller can see, with its role and member counts.
async fn list_spaces(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let spaces = run_blocking(move || directory.visible_spaces(&actor)).await?;
    Ok(ok_list(&spaces))
}

/// `GET /api/v1/spaces/{id}` (name or UUID).
async fn get_space(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let space = run_blocking(move || {
        let (space, _) = directory.visible_space(&actor, &id)?;
        directory
            .visible_spaces(&actor)?
            .into_iter()
            .find(|s| s.id == space.id)
            .ok_or_else(|| Error::not_found(format!("space '{id}' not found")))
    })
    .await?;
    Ok(ok(space))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSpaceBody {
    name: String,
    #[serde(default)]
    description: String,
}

/// `POST /api/v1/spaces {name, description?}`: the machine's owner, or a user through a
/// token that is not read-only (it becomes the space's owner).
async fn create_space(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<NewSpaceBody>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let user = actor.identity.as_ref().map(|i| i.user.clone());
    let space = st
        .write(move || directory.create_space_as(&actor, &b.name, &b.description))
        .await?;
    let members = usize::from(user.is_some());
    let note = user.as_ref().map(|u| {
        format!(
            "'{u}' owns space '{}', but the token used for this request does not include it (a token's spaces never change): to work in the space, use a token that names it, e.g. `quarry token create --user {u} --spaces {}`",
            space.name, space.name
        )
    });
    let body = json!({
        "id": space.id,
        "name": space.name,
        "description": space.description,
        "created_at": space.created_at,
        "role": "owner",
        "members": members,
        "is_default": false,
        "in_token": user.is_none(),
        "note": note,
    });
    Ok((StatusCode::CREATED, ok(body)).into_response())
}

/// `DELETE /api/v1/spaces/{id}[?force=true]`: the machine's owner or an owner of the
/// space. A space that still has knowledge bases or collections is refused (409) unless
/// `force` is set, which deletes them and their documents first.
async fn delete_space(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let mut force = false;
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if k == "force" {
            force = match v.as_ref() {
                "" | "true" | "1" | "yes" => true,
                "false" | "0" | "no" => false,
                other => {
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        format!("invalid force={other:?}: use true or false"),
                    ));
                }
            };
        }
    }
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let root = st.root_engine().clone();
    let (space, removed) = st
        .write(move || {
            let space = directory.check_delete_space(&actor, &id)?;
            let inside = root.scoped(Scope::owner(space.name.clone()));
            let collections = inside.collections()?;
            if !collections.is_empty() {
                if !force {
                    let names: Vec<&str> = collections.iter().map(|c| c.name.as_str()).collect();
                    return Err(Error::Conflict(format!(
                        "space '{}' still has {} knowledge base(s) or collection(s) ({}): delete them first, or add ?force=true to delete them and all their documents with the space",
                        space.name,
                        names.len(),
                        names.join(", ")
                    )));
                }
                for c in &collections {
                    inside.remove_collection(&c.name, &NoProgress)?;
                }
                inside.cleanup(&NoProgress)?;
            }
            directory.delete_space(&space.name)?;
            Ok((space, collections.len()))
        })
        .await?;
    Ok(ok(json!({
        "deleted": true,
        "id": space.id,
        "name": space.name,
        "collections_removed": removed,
    })))
}

/// `GET /api/v1/spaces/{id}/members`: any member (and the machine's owner).
async fn list_members(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let (space, members) = run_blocking(move || directory.members_as(&actor, &id)).await?;
    let total = members.len();
    Ok(axum::Json(json!({
        "success": true,
        "data": members,
        "total": total,
        "space": {"id": space.id, "name": space.name},
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleBody {
    role: String,
}

/// `PUT /api/v1/spaces/{id}/members/{user} {role}`: adds a member or changes its role.
async fn set_member(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((id, user)): Path<(String, String)>,
    Body(b): Body<RoleBody>,
) -> Result<Response, ApiError> {
    let role = parse_role(&b.role)?;
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let member = st
        .write(move || {
            let m = directory.set_member_as(&actor, &id, &user, role)?;
            let (space, _) = directory.visible_space(&actor, &id)?;
            Ok(json!({
                "user": m.user,
                "role": m.role,
                "joined_at": m.joined_at,
                "space": {"id": space.id, "name": space.name},
            }))
        })
        .await?;
    Ok(ok(member))
}

/// `DELETE /api/v1/spaces/{id}/members/{user}`.
async fn remove_member(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((id, user)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let who = user.clone();
    st.write(move || directory.remove_member_as(&actor, &id, &user))
        .await?;
    Ok(ok(json!({"removed": true, "user": who})))
}

/// `GET /api/v1/spaces/{id}/sessions`: the live web sessions of the space's members (made by
/// signing in with an identity provider), for its admins and owners.
async fn list_sessions(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let (_, sessions) = run_blocking(move || directory.sessions_as(&actor, &id)).await?;
    Ok(ok_list(&sessions))
}

/// `DELETE /api/v1/spaces/{id}/sessions/{session}`: signs a member out, on every node.
async fn end_session(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((id, session)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let ended = session.clone();
    st.write(move || directory.revoke_session_as(&actor, &id, &session))
        .await?;
    Ok(ok(json!({"ended": true, "id": ended})))
}

/// `GET /api/v1/users`: the machine's owner only (users are server-wide).
async fn list_users(State(st): State<Arc<AppState>>, caller: Caller) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let users = run_blocking(move || directory.users_as(&actor)).await?;
    Ok(ok_list(&users))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewUserBody {
    name: String,
}

/// `POST /api/v1/users {name}`: the machine's owner only.
async fn create_user(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<NewUserBody>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = caller.principal.clone();
    let user = st
        .write(move || directory.create_user_as(&actor, &b.name))
        .await?;
    Ok((StatusCode::CREATED, ok(user)).into_response())
}
