//! Groups of users in the caller's space over REST (see docs/access-api.md): the space is
//! the request's (`X-Space-ID` / `?space_id=`, else the token's only space), as for its
//! knowledge bases. Handlers translate; the rules (who lists, who manages, only members of
//! the space in its groups, names) live in `quarry_access::Directory`'s `*_group*_as`
//! methods. Changes go through the server's write queue, like the members routes.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde::Deserialize;
use serde_json::json;

use crate::auth::Caller;
use crate::http::{ApiError, Body, ok, ok_list, run_blocking};
use crate::state::AppState;

/// Mounted under the REST surface: the caller's space is the one the request resolved to.
pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/groups", get(list_groups).post(create_group))
        .route(
            "/api/v1/groups/{group}",
            get(get_group).delete(delete_group),
        )
        .route(
            "/api/v1/groups/{group}/members/{user}",
            put(add_member).delete(remove_member),
        )
}

/// The caller's space, as the directory finds it (its name).
fn space_of(caller: &Caller) -> String {
    caller.principal.scope.space.clone()
}

/// `GET /api/v1/groups`: the groups of the caller's space, with their members (any member).
async fn list_groups(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let space = space_of(&caller);
    let actor = caller.principal;
    let (_, groups) = run_blocking(move || directory.groups_as(&actor, &space)).await?;
    Ok(ok_list(&groups))
}

/// `GET /api/v1/groups/{group}` (name or UUID).
async fn get_group(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(group): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let space = space_of(&caller);
    let actor = caller.principal;
    let group = run_blocking(move || directory.group_as(&actor, &space, &group)).await?;
    Ok(ok(group))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewGroupBody {
    name: String,
    #[serde(default)]
    description: String,
}

/// `POST /api/v1/groups {name, description?}`: the space's admins and owners.
async fn create_group(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Body(b): Body<NewGroupBody>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let space = space_of(&caller);
    let actor = caller.principal;
    let group = st
        .write(move || directory.create_group_as(&actor, &space, &b.name, &b.description))
        .await?;
    Ok((StatusCode::CREATED, ok(group)).into_response())
}

/// `DELETE /api/v1/groups/{group}` (name or UUID): the space's admins and owners. Its
/// members stay in the space.
async fn delete_group(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(group): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let space = space_of(&caller);
    let actor = caller.principal;
    let gone = st
        .write(move || directory.delete_group_as(&actor, &space, &group))
        .await?;
    Ok(ok(
        json!({"deleted": true, "id": gone.id, "name": gone.name}),
    ))
}

/// `PUT /api/v1/groups/{group}/members/{user}`: puts a member of the space in the group
/// (again: nothing changes). Answers the group as it is now.
async fn add_member(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((group, user)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let space = space_of(&caller);
    let actor = caller.principal;
    let group = st
        .write(move || directory.add_group_members_as(&actor, &space, &group, &[user]))
        .await?;
    Ok(ok(group))
}

/// `DELETE /api/v1/groups/{group}/members/{user}`: 404 when the user is not in the group.
async fn remove_member(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((group, user)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let space = space_of(&caller);
    let actor = caller.principal;
    let who = user.clone();
    let group = st
        .write(move || directory.remove_group_members_as(&actor, &space, &group, &[user]))
        .await?;
    Ok(ok(json!({"removed": true, "user": who, "group": group})))
}
