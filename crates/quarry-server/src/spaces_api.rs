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
use axum::routing::{get, put};
use quarry_access::{Actor, parse_role};
use quarry_core::{Error, Scope};
use quarry_engine::NoProgress;
use serde::Deserialize;
use serde_json::json;

use crate::auth::Caller;
use crate::knowledge_api::{ok, ok_list};
use crate::rest::{Body, blocking};
use crate::{ApiError, AppState};

/// Mounted under the Account surface: a token with several spaces needs to name none.
pub fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/spaces", get(list_spaces).post(create_space))
        .route("/api/v1/spaces/{id}", get(get_space).delete(delete_space))
        .route("/api/v1/spaces/{id}/members", get(list_members))
        .route(
            "/api/v1/spaces/{id}/members/{user}",
            put(set_member).delete(remove_member),
        )
        .route("/api/v1/users", get(list_users).post(create_user))
}

/// `GET /api/v1/spaces`: the spaces the caller can see, with its role and member counts.
async fn list_spaces(
    State(st): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = Actor::of(&caller.principal);
    let spaces = blocking(move || directory.visible_spaces(&actor)).await?;
    Ok(ok_list(&spaces))
}

/// `GET /api/v1/spaces/{id}` (name or UUID).
async fn get_space(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = Actor::of(&caller.principal);
    let space = blocking(move || {
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
    let actor = Actor::of(&caller.principal);
    let user = match &actor {
        Actor::User { name, .. } => Some(name.clone()),
        Actor::MachineOwner => None,
    };
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
    let actor = Actor::of(&caller.principal);
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
    let actor = Actor::of(&caller.principal);
    let (space, members) = blocking(move || directory.members_as(&actor, &id)).await?;
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
    let actor = Actor::of(&caller.principal);
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
    let actor = Actor::of(&caller.principal);
    let who = user.clone();
    st.write(move || directory.remove_member_as(&actor, &id, &user))
        .await?;
    Ok(ok(json!({"removed": true, "user": who})))
}

/// `GET /api/v1/users`: the machine's owner only (users are server-wide).
async fn list_users(State(st): State<Arc<AppState>>, caller: Caller) -> Result<Response, ApiError> {
    let directory = st.directory().clone();
    let actor = Actor::of(&caller.principal);
    let users = blocking(move || directory.users_as(&actor)).await?;
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
    let actor = Actor::of(&caller.principal);
    let user = st
        .write(move || directory.create_user_as(&actor, &b.name))
        .await?;
    Ok((StatusCode::CREATED, ok(user)).into_response())
}

#[cfg(test)]
mod tests {
    //! The permission matrix through the real router (auth middleware included), on a
    //! temporary store: the machine's owner (open mode, no token) and users with tokens.

    use std::sync::Arc;

    use axum::http::StatusCode;
    use quarry_access::{Role, TokenRequest};
    use quarry_core::Scope;
    use serde_json::{Value, json};
    use tokio_util::sync::CancellationToken;

    use crate::{AppState, HttpOptions};

    struct World {
        _dir: tempfile::TempDir,
        addr: std::net::SocketAddr,
        state: Arc<AppState>,
        shutdown: CancellationToken,
    }

    impl Drop for World {
        fn drop(&mut self) {
            self.shutdown.cancel();
        }
    }

    async fn world() -> World {
        let dir = tempfile::tempdir().unwrap();
        let engine = quarry_engine::Engine::open(quarry_engine::EngineOptions {
            home: dir.path().to_path_buf(),
            index: "index".into(),
            space: quarry_core::DEFAULT_SPACE.into(),
            max_file_bytes: 10 << 20,
        })
        .unwrap();
        let state = AppState::new(engine);
        let shutdown = CancellationToken::new();
        let opts = HttpOptions {
            port: 0,
            ..HttpOptions::default()
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(crate::serve_http(
            state.clone(),
            opts,
            shutdown.clone(),
            move |addr| {
                let _ = tx.send(addr);
            },
        ));
        let addr = rx.await.unwrap();
        World {
            _dir: dir,
            addr,
            state,
            shutdown,
        }
    }

    impl World {
        fn token(&self, user: &str, spaces: &[&str], read_only: bool) -> String {
            self.state
                .directory()
                .create_token(&TokenRequest {
                    user: user.into(),
                    spaces: spaces.iter().map(|s| s.to_string()).collect(),
                    read_only,
                    ..Default::default()
                })
                .unwrap()
                .token
        }

        /// One HTTP/1.1 request over a plain socket (`Connection: close`); the status and
        /// the JSON body (`Null` when there is none).
        async fn call(
            &self,
            method: &str,
            path: &str,
            token: Option<&str>,
            body: Option<Value>,
        ) -> (StatusCode, Value) {
            let mut req =
                format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
            if let Some(t) = token {
                req.push_str(&format!("Authorization: Bearer {t}\r\n"));
            }
            let body = body.map(|b| b.to_string()).unwrap_or_default();
            if !body.is_empty() {
                req.push_str("Content-Type: application/json\r\n");
            }
            req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
            let addr = self.addr;
            let raw = tokio::task::spawn_blocking(move || {
                use std::io::{Read, Write};
                let mut sock = std::net::TcpStream::connect(addr).unwrap();
                sock.write_all(req.as_bytes()).unwrap();
                let mut out = Vec::new();
                sock.read_to_end(&mut out).unwrap();
                out
            })
            .await
            .unwrap();
            let text = String::from_utf8(raw).unwrap();
            let (head, mut payload) = text.split_once("\r\n\r\n").unwrap();
            let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
            let chunked;
            let decoded = if head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked")
            {
                let mut out = String::new();
                while let Some((size, rest)) = payload.split_once("\r\n") {
                    let n = usize::from_str_radix(size.trim(), 16).unwrap();
                    if n == 0 {
                        break;
                    }
                    out.push_str(&rest[..n]);
                    payload = &rest[n + 2..];
                }
                chunked = out;
                chunked.as_str()
            } else {
                payload
            };
            (
                StatusCode::from_u16(status).unwrap(),
                serde_json::from_str(decoded).unwrap_or(Value::Null),
            )
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn permission_matrix() {
        let w = world().await;
        let d = w.state.directory();
        d.default_space().unwrap();
        // Machine owner (no token, open mode): users and spaces.
        for u in ["olga", "adam", "eve", "vic", "ozzy", "newbie"] {
            let (s, _) = w
                .call("POST", "/api/v1/users", None, Some(json!({"name": u})))
                .await;
            assert_eq!(s, StatusCode::CREATED);
        }
        let (s, b) = w
            .call("POST", "/api/v1/users", None, Some(json!({"name": "olga"})))
            .await;
        assert_eq!(s, StatusCode::CONFLICT, "{b}");
        let (s, b) = w
            .call(
                "POST",
                "/api/v1/spaces",
                None,
                Some(json!({"name": "team", "description": "T"})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        assert_eq!(b["data"]["in_token"], true);
        let (s, _) = w
            .call(
                "POST",
                "/api/v1/spaces",
                None,
                Some(json!({"name": "other"})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED);
        let (s, b) = w
            .call(
                "POST",
                "/api/v1/spaces",
                None,
                Some(json!({"name": "team"})),
            )
            .await;
        assert_eq!(s, StatusCode::CONFLICT, "{b}");
        let (s, b) = w
            .call(
                "POST",
                "/api/v1/spaces",
                None,
                Some(json!({"name": "Bad Name"})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        let (s, b) = w
            .call(
                "POST",
                "/api/v1/spaces",
                None,
                Some(json!({"name": "x", "colour": 1})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        for (u, space, role) in [
            ("olga", "team", "owner"),
            ("adam", "team", "admin"),
            ("eve", "team", "editor"),
            ("vic", "team", "viewer"),
            ("ozzy", "other", "owner"),
        ] {
            let (s, b) = w
                .call(
                    "PUT",
                    &format!("/api/v1/spaces/{space}/members/{u}"),
                    None,
                    Some(json!({"role": role})),
                )
                .await;
            assert_eq!(s, StatusCode::OK, "{b}");
        }
        let (s, b) = w
            .call(
                "PUT",
                "/api/v1/spaces/team/members/newbie",
                None,
                Some(json!({"role": "boss"})),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert!(
            b["detail"]
                .as_str()
                .unwrap()
                .contains("owner, admin, editor, viewer"),
            "{b}"
        );
        let (s, b) = w
            .call(
                "PUT",
                "/api/v1/spaces/team/members/ghost",
                None,
                Some(json!({"role": "viewer"})),
            )
            .await;
        assert_eq!(
            (s, b["detail"].as_str()),
            (StatusCode::NOT_FOUND, Some("user 'ghost' not found"))
        );
        let (s, b) = w.call("GET", "/api/v1/spaces", None, None).await;
        assert_eq!(s, StatusCode::OK);
        let listed: Vec<(String, i64)> = b["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_owned(),
                    s["members"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("default".into(), 0),
                ("other".into(), 1),
                ("team".into(), 4)
            ]
        );

        let olga = w.token("olga", &["team"], false);
        let adam = w.token("adam", &["team"], false);
        let eve = w.token("eve", &["team"], false);
        let vic = w.token("vic", &["team"], true);
        let olga_ro = w.token("olga", &["team"], true);

        // Token users see their spaces only; others look missing.
        let (_, b) = w.call("GET", "/api/v1/spaces", Some(&eve), None).await;
        let spaces = b["data"].as_array().unwrap();
        assert_eq!(spaces.len(), 1);
        assert_eq!(
            (spaces[0]["name"].as_str(), spaces[0]["role"].as_str()),
            (Some("team"), Some("editor"))
        );
        let other_id = d.space("other").unwrap().id;
        for path in [
            format!("/api/v1/spaces/{other_id}/members"),
            "/api/v1/spaces/other/members".into(),
            "/api/v1/spaces/nope/members".into(),
        ] {
            let (s, _) = w.call("GET", &path, Some(&olga), None).await;
            assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
        }
        let (s, _) = w
            .call("DELETE", "/api/v1/spaces/other", Some(&olga), None)
            .await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (s, b) = w
            .call("GET", "/api/v1/spaces/team/members", Some(&vic), None)
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b["total"], 4);

        // Members: editors and read-only tokens change nothing; admins manage non-owners.
        let put = |role: &str| Some(json!({ "role": role }));
        for (tok, path, role, want) in [
            (
                &eve,
                "/api/v1/spaces/team/members/newbie",
                "viewer",
                StatusCode::FORBIDDEN,
            ),
            (
                &vic,
                "/api/v1/spaces/team/members/newbie",
                "viewer",
                StatusCode::FORBIDDEN,
            ),
            (
                &olga_ro,
                "/api/v1/spaces/team/members/newbie",
                "viewer",
                StatusCode::FORBIDDEN,
            ),
            (
                &adam,
                "/api/v1/spaces/team/members/newbie",
                "owner",
                StatusCode::FORBIDDEN,
            ),
            (
                &adam,
                "/api/v1/spaces/team/members/olga",
                "admin",
                StatusCode::FORBIDDEN,
            ),
            (
                &adam,
                "/api/v1/spaces/team/members/newbie",
                "editor",
                StatusCode::OK,
            ),
            (
                &adam,
                "/api/v1/spaces/team/members/newbie",
                "viewer",
                StatusCode::OK,
            ),
            (
                &olga,
                "/api/v1/spaces/team/members/olga",
                "admin",
                StatusCode::CONFLICT,
            ),
        ] {
            let (s, b) = w.call("PUT", path, Some(tok), put(role)).await;
            assert_eq!(s, want, "{path} {role}: {b}");
        }
        for (tok, path, want) in [
            (
                &eve,
                "/api/v1/spaces/team/members/newbie",
                StatusCode::FORBIDDEN,
            ),
            (
                &adam,
                "/api/v1/spaces/team/members/olga",
                StatusCode::FORBIDDEN,
            ),
            (
                &olga,
                "/api/v1/spaces/team/members/olga",
                StatusCode::CONFLICT,
            ),
            (&adam, "/api/v1/spaces/team/members/newbie", StatusCode::OK),
            (
                &adam,
                "/api/v1/spaces/team/members/newbie",
                StatusCode::NOT_FOUND,
            ),
        ] {
            let (s, b) = w.call("DELETE", path, Some(tok), None).await;
            assert_eq!(s, want, "{path}: {b}");
        }

        // Users are the machine owner's.
        for (m, body) in [("GET", None), ("POST", Some(json!({"name": "zed"})))] {
            let (s, b) = w.call(m, "/api/v1/users", Some(&olga), body).await;
            assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
            assert!(
                b["detail"].as_str().unwrap().contains("machine's owner"),
                "{b}"
            );
        }

        // Spaces: a token user creates one (and owns it), read-only tokens cannot.
        let (s, _) = w
            .call(
                "POST",
                "/api/v1/spaces",
                Some(&vic),
                Some(json!({"name": "lab"})),
            )
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN);
        let (s, b) = w
            .call(
                "POST",
                "/api/v1/spaces",
                Some(&eve),
                Some(json!({"name": "lab"})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        assert_eq!(b["data"]["in_token"], false);
        assert!(b["data"]["note"].as_str().unwrap().contains("token"), "{b}");
        assert!(
            d.user_spaces("eve")
                .unwrap()
                .iter()
                .any(|s| s.name == "lab" && s.role == Role::Owner)
        );
        // Deleting: only owners; never the default space.
        let (s, _) = w
            .call("DELETE", "/api/v1/spaces/team", Some(&adam), None)
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN);
        let (s, _) = w
            .call("DELETE", "/api/v1/spaces/team", Some(&olga_ro), None)
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN);
        let (s, b) = w.call("DELETE", "/api/v1/spaces/default", None, None).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert!(
            b["detail"].as_str().unwrap().contains("default space"),
            "{b}"
        );
        // A space with a knowledge base needs force.
        w.state
            .root_engine()
            .scoped(Scope::owner("team"))
            .create_knowledge_base(&quarry_engine::CreateKnowledgeBase {
                name: "kb1".into(),
                description: String::new(),
                chunk_size: None,
                chunk_overlap: None,
            })
            .unwrap();
        let (s, b) = w
            .call("DELETE", "/api/v1/spaces/team", Some(&olga), None)
            .await;
        assert_eq!(s, StatusCode::CONFLICT, "{b}");
        assert!(b["detail"].as_str().unwrap().contains("kb1"), "{b}");
        let (s, b) = w
            .call(
                "DELETE",
                "/api/v1/spaces/team?force=true",
                Some(&olga),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b["data"]["collections_removed"], 1);
        let (s, _) = w.call("GET", "/api/v1/spaces/team", None, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (s, b) = w.call("DELETE", "/api/v1/spaces/other", None, None).await;
        assert_eq!(s, StatusCode::OK, "{b}");
    }
}
