//! `/api/v1/groups`: groups of users in the caller's space, driven in-process. Any member
//! lists them; admins and owners change them; only members of the space join them; another
//! space's groups are never seen.

use crate::common::{Fixture, assert_error};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use quarry_access::{Role, TokenRequest};
use quarry_server::AuthMode;
use serde_json::{Value, json};

type Answer = (StatusCode, header::HeaderMap, Value);

/// `method uri` with `token` as the bearer, a JSON body when given, and `space` as
/// `X-Space-ID` when given.
fn call(
    f: &Fixture,
    method: &str,
    uri: &str,
    token: &str,
    space: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    if let Some(space) = space {
        req = req.header("x-space-id", space);
    }
    let req = match body {
        Some(b) => req
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(b.to_string())),
        None => req.body(Body::empty()),
    }
    .expect("request");
    f.send(req)
}

/// A token of `user` for `spaces`.
fn token_of(f: &Fixture, user: &str, spaces: &[&str], read_only: bool) -> String {
    f.state
        .directory()
        .create_token(&TokenRequest {
            user: user.into(),
            label: "test".into(),
            spaces: spaces.iter().map(|s| (*s).to_owned()).collect(),
            read_only,
            // These tests are about the roles' rules: a credential that may manage.
            manage: !read_only,
            ..TokenRequest::default()
        })
        .expect("token")
        .token
}

/// The fixture's `ann` (admin of `default`) plus `bob` (viewer there), `carl` (editor
/// there), `dora` (owner of `other` only) and `olga` (owner of `default`).
fn team() -> Fixture {
    let f = Fixture::new(AuthMode::Token);
    let d = f.state.directory();
    for (user, space, role) in [
        ("bob", "default", Role::Viewer),
        ("carl", "default", Role::Editor),
        ("dora", "other", Role::Owner),
        ("olga", "default", Role::Owner),
    ] {
        d.create_user(user).expect("user");
        d.grant(user, space, role).expect("grant");
    }
    f
}

fn members(v: &Value) -> Vec<&str> {
    v["members"]
        .as_array()
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn admins_manage_the_groups_of_their_space_and_members_list_them() {
    let f = team();
    let (ann, _) = f.token(None);
    let bob = token_of(&f, "bob", &["default"], false);

    let (status, _, body) = call(
        &f,
        "POST",
        "/api/v1/groups",
        &ann,
        None,
        Some(json!({"name": "eng", "description": "the engineers"})),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["success"], true, "{body}");
    let eng = &body["data"];
    let keys: Vec<&str> = eng
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        ["created_at", "description", "id", "members", "name"],
        "{eng}"
    );
    assert_eq!(
        (&eng["name"], &eng["description"]),
        (&json!("eng"), &json!("the engineers"))
    );
    assert!(eng["created_at"].as_i64().is_some_and(|t| t > 0), "{eng}");
    assert!(members(eng).is_empty());
    let id = eng["id"].as_str().unwrap_or_default().to_owned();
    assert_eq!(id.len(), 36, "{eng}");

    // Members of the space join, once; by name or by the group's UUID.
    for (group, user) in [("eng", "bob"), (id.as_str(), "carl"), ("eng", "bob")] {
        let (status, _, body) = call(
            &f,
            "PUT",
            &format!("/api/v1/groups/{group}/members/{user}"),
            &ann,
            None,
            None,
        );
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, _, body) = call(
        &f,
        "PUT",
        "/api/v1/groups/eng/members/olga",
        &ann,
        None,
        None,
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(members(&body["data"]), ["bob", "carl", "olga"]);

    // Any member of the space lists them (a viewer, a read-only token).
    let (status, _, body) = call(&f, "GET", "/api/v1/groups", &bob, None, None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["total"], 1, "{body}");
    assert_eq!(body["data"][0]["name"], "eng", "{body}");
    assert_eq!(members(&body["data"][0]), ["bob", "carl", "olga"]);
    let bob_ro = token_of(&f, "bob", &["default"], true);
    let (status, _, body) = call(
        &f,
        "GET",
        &format!("/api/v1/groups/{id}"),
        &bob_ro,
        None,
        None,
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["name"], "eng", "{body}");

    // Out and back: a user not in the group is not found the second time.
    let (status, _, body) = call(
        &f,
        "DELETE",
        "/api/v1/groups/eng/members/carl",
        &ann,
        None,
        None,
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (&body["data"]["removed"], &body["data"]["user"]),
        (&json!(true), &json!("carl"))
    );
    assert_eq!(members(&body["data"]["group"]), ["bob", "olga"]);
    let again = call(
        &f,
        "DELETE",
        "/api/v1/groups/eng/members/carl",
        &ann,
        None,
        None,
    );
    assert_error(&again, StatusCode::NOT_FOUND, "NOT_FOUND");

    // Deleting the group keeps its members in the space.
    let (status, _, body) = call(&f, "DELETE", "/api/v1/groups/eng", &ann, None, None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["data"],
        json!({"deleted": true, "id": id, "name": "eng"})
    );
    let again = call(&f, "DELETE", "/api/v1/groups/eng", &ann, None, None);
    assert_error(&again, StatusCode::NOT_FOUND, "NOT_FOUND");
    let (_, _, body) = call(&f, "GET", "/api/v1/groups", &bob, None, None);
    assert_eq!(body["total"], 0, "{body}");
    let (_, members) = f
        .state
        .directory()
        .members_as(&quarry_access::Principal::owner("default", ""), "default")
        .expect("members");
    assert_eq!(members.len(), 4);
}

#[test]
fn bad_inputs_have_clear_errors() {
    let f = team();
    let (ann, _) = f.token(None);
    let created = call(
        &f,
        "POST",
        "/api/v1/groups",
        &ann,
        None,
        Some(json!({"name": "eng"})),
    );
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.2);
    let post = |body: Value| call(&f, "POST", "/api/v1/groups", &ann, None, Some(body));

    let dup = post(json!({"name": "eng"}));
    assert_error(&dup, StatusCode::CONFLICT, "CONFLICT");
    for name in ["a b", "", "-x", "group:eng", &"x".repeat(65)] {
        let bad = post(json!({"name": name}));
        assert_error(&bad, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    }
    let bad = post(json!({"name": "ops", "description": "d".repeat(1001)}));
    assert_error(&bad, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    let unknown = post(json!({"name": "ops", "members": ["bob"]}));
    assert_error(&unknown, StatusCode::BAD_REQUEST, "INVALID_INPUT");
    let missing = post(json!({"description": "no name"}));
    assert_error(&missing, StatusCode::BAD_REQUEST, "INVALID_INPUT");

    let put = |uri: &str| call(&f, "PUT", uri, &ann, None, None);
    let no_group = put("/api/v1/groups/nope/members/bob");
    assert_error(&no_group, StatusCode::NOT_FOUND, "NOT_FOUND");
    assert!(
        no_group.2["detail"]
            .as_str()
            .is_some_and(|d| d.contains("group 'nope' not found")),
        "{}",
        no_group.2
    );
    let no_user = put("/api/v1/groups/eng/members/ghost");
    assert_error(&no_user, StatusCode::NOT_FOUND, "NOT_FOUND");
    assert_eq!(no_user.2["detail"], "user 'ghost' not found");
    let outsider = put("/api/v1/groups/eng/members/dora");
    assert_error(&outsider, StatusCode::CONFLICT, "CONFLICT");
    assert!(
        outsider.2["detail"]
            .as_str()
            .is_some_and(|d| d.contains("not a member of space 'default'")),
        "{}",
        outsider.2
    );
    let not_in = call(
        &f,
        "DELETE",
        "/api/v1/groups/eng/members/bob",
        &ann,
        None,
        None,
    );
    assert_error(&not_in, StatusCode::NOT_FOUND, "NOT_FOUND");
    let no_group = call(&f, "GET", "/api/v1/groups/nope", &ann, None, None);
    assert_error(&no_group, StatusCode::NOT_FOUND, "NOT_FOUND");
}

#[test]
fn editors_viewers_and_read_only_tokens_change_nothing() {
    let f = team();
    let (ann, _) = f.token(None);
    let created = call(
        &f,
        "POST",
        "/api/v1/groups",
        &ann,
        None,
        Some(json!({"name": "eng"})),
    );
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.2);
    let callers = [
        token_of(&f, "bob", &["default"], false),
        token_of(&f, "carl", &["default"], false),
        // An owner's and an admin's read-only tokens.
        token_of(&f, "olga", &["default"], true),
        token_of(&f, "ann", &["default"], true),
    ];
    for token in &callers {
        for (method, uri, body) in [
            ("POST", "/api/v1/groups", Some(json!({"name": "ops"}))),
            ("DELETE", "/api/v1/groups/eng", None),
            ("PUT", "/api/v1/groups/eng/members/bob", None),
            ("DELETE", "/api/v1/groups/eng/members/bob", None),
        ] {
            let refused = call(&f, method, uri, token, None, body);
            assert_error(&refused, StatusCode::FORBIDDEN, "FORBIDDEN");
        }
    }
    // An owner with a token that may write does what an admin does.
    let olga = token_of(&f, "olga", &["default"], false);
    let (status, _, body) = call(
        &f,
        "PUT",
        "/api/v1/groups/eng/members/bob",
        &olga,
        None,
        None,
    );
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[test]
fn another_space_never_sees_these_groups() {
    let f = team();
    let (ann, _) = f.token(None);
    let created = call(
        &f,
        "POST",
        "/api/v1/groups",
        &ann,
        None,
        Some(json!({"name": "eng"})),
    );
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.2);
    let eng_id = created.2["data"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let dora = token_of(&f, "dora", &["other"], false);
    // Her space has none; this space's, by name or UUID, are not found.
    let (status, _, body) = call(&f, "GET", "/api/v1/groups", &dora, None, None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"], json!([]), "{body}");
    for key in ["eng", eng_id.as_str()] {
        let hidden = call(
            &f,
            "GET",
            &format!("/api/v1/groups/{key}"),
            &dora,
            None,
            None,
        );
        assert_error(&hidden, StatusCode::NOT_FOUND, "NOT_FOUND");
        let hidden = call(
            &f,
            "DELETE",
            &format!("/api/v1/groups/{key}"),
            &dora,
            None,
            None,
        );
        assert_error(&hidden, StatusCode::NOT_FOUND, "NOT_FOUND");
    }
    // Naming this space does not get her in.
    let refused = call(&f, "GET", "/api/v1/groups", &dora, Some("default"), None);
    assert_error(&refused, StatusCode::FORBIDDEN, "SPACE_FORBIDDEN");
    // A group of the same name in her space is another group.
    let (status, _, body) = call(
        &f,
        "POST",
        "/api/v1/groups",
        &dora,
        None,
        Some(json!({"name": "eng"})),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_ne!(body["data"]["id"], json!(eng_id));
    let (_, _, body) = call(&f, "GET", "/api/v1/groups", &ann, None, None);
    assert_eq!(body["total"], 1, "{body}");
    assert_eq!(body["data"][0]["id"], json!(eng_id));
    // A token of both spaces picks one with X-Space-ID.
    f.state
        .directory()
        .grant("dora", "default", Role::Admin)
        .expect("grant");
    let both = token_of(&f, "dora", &["other", "default"], false);
    let (_, _, body) = call(&f, "GET", "/api/v1/groups", &both, Some("default"), None);
    assert_eq!(body["data"][0]["id"], json!(eng_id), "{body}");
    let (_, _, body) = call(&f, "GET", "/api/v1/groups", &both, Some("other"), None);
    assert_ne!(body["data"][0]["id"], json!(eng_id), "{body}");
}

#[test]
fn the_machine_owner_manages_groups_in_open_mode() {
    let f = Fixture::new(AuthMode::Open);
    let send = |method: &str, uri: &str, body: Option<Value>| {
        let req = Request::builder().method(method).uri(uri);
        let req = match body {
            Some(b) => req
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(b.to_string())),
            None => req.body(Body::empty()),
        }
        .expect("request");
        f.send(req)
    };
    let (status, _, body) = send("POST", "/api/v1/groups", Some(json!({"name": "eng"})));
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, body) = send("PUT", "/api/v1/groups/eng/members/ann", None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(members(&body["data"]), ["ann"]);
    let (status, _, body) = send("GET", "/api/v1/groups?space_id=other", None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["total"], 0, "{body}");
}
