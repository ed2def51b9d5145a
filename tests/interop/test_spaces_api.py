"""Spaces, members and users over REST (docs/access-api.md), end to end through the real binary.

One open loopback server (no ``--auth``) for the module: a request without a token is the
machine's owner, one with a token is that token's user (open mode still checks and applies a
token). The machine's owner builds the team over the API itself: users ``olga`` (owner of
``team``), ``adam`` (admin), ``eve`` (editor), ``vic`` (viewer), ``ozzy`` (owner of
``other``) and ``newbie`` (no space). Then every rule is probed with tokens made by the CLI:
what a caller may not see answers exactly like what does not exist.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest
import requests
from conftest import QuarryHome, QuarryServer, make_home, start_server

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
RANDOM_UUID = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
ROLES_TEXT = "owner, admin, editor, viewer"


@dataclass
class World:
    home: QuarryHome
    srv: QuarryServer
    spaces: dict[str, str] = field(default_factory=dict)  # name -> UUID
    tokens: dict[str, str] = field(default_factory=dict)  # key -> secret

    def call(self, method: str, path: str, token: str | None = None, body=None, **kw) -> requests.Response:
        headers = dict(kw.pop("headers", {}) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.srv.url(path), json=body, headers=headers, timeout=60, **kw)

    def ok(self, method: str, path: str, token: str | None = None, body=None, status: int = 200, **kw):
        r = self.call(method, path, token, body, **kw)
        assert r.status_code == status, (method, path, r.status_code, r.text)
        doc = r.json()
        assert doc["success"] is True, doc
        return doc

    def token(self, user: str, *args: str) -> str:
        r = self.home.run("--json", "token", "create", "--user", user, *args)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["token"]


def error(r: requests.Response, status: int, fragment: str | None = None) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["status_code"] == status and isinstance(body["detail"], str), body
    if fragment is not None:
        assert fragment in body["detail"], (fragment, body)
    return body["detail"]


@pytest.fixture(scope="module")
def world(quarry_bin, corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("spaces-api")
    home = make_home(quarry_bin, corpus, root / "quarry-home", env={"QUARRY_OCR": "off"})
    srv = start_server(home, logdir=root / "logs")
    w = World(home=home, srv=srv)
    for user in ("olga", "adam", "eve", "vic", "ozzy", "newbie"):
        doc = w.ok("POST", "/api/v1/users", body={"name": user}, status=201)
        assert doc["data"]["name"] == user and UUID_RE.match(doc["data"]["id"]), doc
    for name, desc in (("team", "The team"), ("other", "")):
        doc = w.ok("POST", "/api/v1/spaces", body={"name": name, "description": desc}, status=201)
        s = doc["data"]
        assert (s["name"], s["description"], s["members"], s["in_token"], s["note"]) == (name, desc, 0, True, None), s
        w.spaces[name] = s["id"]
    for user, space, role in (
        ("olga", "team", "owner"),
        ("adam", "team", "admin"),
        ("eve", "team", "editor"),
        ("vic", "team", "viewer"),
        ("ozzy", "other", "owner"),
    ):
        doc = w.ok("PUT", f"/api/v1/spaces/{space}/members/{user}", body={"role": role})
        assert doc["data"]["user"] == user and doc["data"]["role"] == role, doc
        assert doc["data"]["space"] == {"id": w.spaces[space], "name": space}, doc
    for key, user, args in (
        ("olga", "olga", ("--spaces", "team")),
        ("olga_ro", "olga", ("--spaces", "team", "--read-only")),
        ("adam", "adam", ("--spaces", "team")),
        ("eve", "eve", ("--spaces", "team")),
        ("vic", "vic", ("--spaces", "team")),
        ("ozzy", "ozzy", ("--spaces", "other")),
    ):
        # People managing their spaces: each token made with the management scope.
        w.tokens[key] = w.token(user, *args, *(() if "--read-only" in args else ("--manage",)))
    yield w
    srv.stop()


def test_machine_owner_sees_everything_and_validation_is_clear(world):
    w = world
    doc = w.ok("GET", "/api/v1/spaces")
    listed = {s["name"]: s for s in doc["data"]}
    assert doc["total"] == len(doc["data"])
    assert {"team", "other"} <= set(listed), listed
    assert (listed["team"]["role"], listed["team"]["members"], listed["team"]["is_default"]) == ("owner", 4, False)
    assert listed["team"]["description"] == "The team" and listed["team"]["id"] == w.spaces["team"]
    # By name or UUID.
    assert w.ok("GET", f"/api/v1/spaces/{w.spaces['team']}")["data"]["name"] == "team"
    assert w.ok("GET", "/api/v1/spaces/other")["data"]["members"] == 1

    error(w.call("POST", "/api/v1/spaces", body={"name": "team"}), 409, "already exists")
    error(w.call("POST", "/api/v1/spaces", body={"name": "Bad Name"}), 400, "lowercase letters")
    error(w.call("POST", "/api/v1/spaces", body={"name": RANDOM_UUID}), 400, "UUID")
    error(w.call("POST", "/api/v1/spaces", body={"name": "x", "colour": "red"}), 400, "colour")
    error(w.call("POST", "/api/v1/spaces", body={"description": "no name"}), 400, "name")
    error(w.call("POST", "/api/v1/spaces", body={"name": "x", "description": "d" * 1001}), 400, "1000")
    error(w.call("POST", "/api/v1/users", body={"name": "olga"}), 409, "already exists")
    error(w.call("POST", "/api/v1/users", body={"name": "Olga!"}), 400, "invalid user name")

    users = {u["name"]: u for u in w.ok("GET", "/api/v1/users")["data"]}
    assert {"olga", "adam", "eve", "vic", "ozzy", "newbie"} <= set(users)
    assert users["olga"]["spaces"] == [{"space": "team", "space_id": w.spaces["team"], "role": "owner"}]
    assert users["newbie"]["spaces"] == []

    members = w.ok("GET", "/api/v1/spaces/team/members")
    assert members["space"] == {"id": w.spaces["team"], "name": "team"} and members["total"] == 4
    got = {(m["user"], m["role"]) for m in members["data"]}
    assert got == {("olga", "owner"), ("adam", "admin"), ("eve", "editor"), ("vic", "viewer")}
    assert all(isinstance(m["joined_at"], int) and m["joined_at"] > 0 for m in members["data"])

    detail = error(w.call("PUT", "/api/v1/spaces/team/members/newbie", body={"role": "boss"}), 400)
    assert ROLES_TEXT in detail, detail
    assert error(w.call("PUT", "/api/v1/spaces/team/members/ghost", body={"role": "viewer"}), 404) == "user 'ghost' not found"
    error(w.call("PUT", "/api/v1/spaces/team/members/newbie", body={}), 400, "role")
    error(w.call("PUT", "/api/v1/spaces/nope/members/newbie", body={"role": "viewer"}), 404, "space 'nope' not found")


def test_token_users_see_only_their_spaces_and_the_rest_looks_missing(world):
    w = world
    doc = w.ok("GET", "/api/v1/spaces", w.tokens["eve"])
    assert [(s["name"], s["role"], s["members"]) for s in doc["data"]] == [("team", "editor", 4)], doc
    doc = w.ok("GET", "/api/v1/spaces", w.tokens["ozzy"])
    assert [(s["name"], s["role"]) for s in doc["data"]] == [("other", "owner")], doc
    # Any member, any role, lists its space's members.
    assert w.ok("GET", "/api/v1/spaces/team/members", w.tokens["vic"])["total"] == 4

    other = w.spaces["other"]
    for method, suffix, body in (
        ("GET", "", None),
        ("GET", "/members", None),
        ("DELETE", "", None),
        ("PUT", "/members/newbie", {"role": "viewer"}),
        ("DELETE", "/members/ozzy", None),
    ):
        for key, stand_in in ((other, RANDOM_UUID), ("other", "nosuchspace")):
            foreign = w.call(method, f"/api/v1/spaces/{key}{suffix}", w.tokens["olga"], body)
            missing = w.call(method, f"/api/v1/spaces/{stand_in}{suffix}", w.tokens["olga"], body)
            d1, d2 = error(foreign, 404), error(missing, 404)
            assert d1.replace(key, stand_in) == d2, (method, suffix, d1, d2)
            assert foreign.json().keys() == missing.json().keys()
    # Naming the space in the header changes nothing.
    error(w.call("GET", "/api/v1/spaces/other/members", w.tokens["olga"], headers={"X-Space-ID": "team"}), 404)


def test_member_permission_matrix(world):
    w = world
    t = w.tokens
    put = lambda tok, user, role: w.call("PUT", f"/api/v1/spaces/team/members/{user}", t[tok], {"role": role})  # noqa: E731
    rm = lambda tok, user: w.call("DELETE", f"/api/v1/spaces/team/members/{user}", t[tok])  # noqa: E731

    # Editors, viewers and read-only tokens manage nobody (and learn nothing about users).
    error(put("eve", "newbie", "viewer"), 403, "admin or owner")
    error(put("eve", "ghost", "viewer"), 403, "admin or owner")
    error(put("vic", "newbie", "viewer"), 403)
    error(put("olga_ro", "newbie", "viewer"), 403, "read-only")
    error(rm("eve", "vic"), 403)
    error(rm("olga_ro", "vic"), 403, "read-only")
    # Admins add, change and remove non-owners; never touch the owner role.
    r = put("adam", "newbie", "editor")
    assert r.status_code == 200 and r.json()["data"]["role"] == "editor", r.text
    joined = r.json()["data"]["joined_at"]
    r = put("adam", "newbie", "viewer")
    assert r.status_code == 200 and r.json()["data"]["joined_at"] == joined, r.text
    error(put("adam", "newbie", "owner"), 403, "owner")
    error(put("adam", "olga", "admin"), 403, "owner")
    error(rm("adam", "olga"), 403, "owner")
    assert rm("adam", "newbie").json()["data"] == {"removed": True, "user": "newbie"}
    error(rm("adam", "newbie"), 404, "is not a member")
    error(put("adam", "ghost", "viewer"), 404, "user 'ghost' not found")
    # The last owner can be neither demoted nor removed, by anyone.
    error(put("olga", "olga", "admin"), 409, "last owner")
    error(rm("olga", "olga"), 409, "last owner")
    error(w.call("DELETE", "/api/v1/spaces/team/members/olga"), 409, "last owner")
    # With a second owner, the first may step down; the new owner restores things.
    assert put("olga", "adam", "owner").status_code == 200
    assert put("olga", "olga", "admin").status_code == 200
    error(put("olga", "adam", "admin"), 403, "owner")  # olga is an admin now
    assert put("adam", "olga", "owner").status_code == 200
    assert put("olga", "adam", "admin").status_code == 200
    got = {(m["user"], m["role"]) for m in w.ok("GET", "/api/v1/spaces/team/members")["data"]}
    assert got == {("olga", "owner"), ("adam", "admin"), ("eve", "editor"), ("vic", "viewer")}


def test_memberships_take_effect_on_tokens_at_once(world):
    w = world
    w.ok("PUT", "/api/v1/spaces/team/members/newbie", w.tokens["adam"], {"role": "editor"})
    tok = w.token("newbie", "--spaces", "team")
    assert w.call("GET", "/api/v1/knowledge-bases", tok).status_code == 200
    w.ok("DELETE", "/api/v1/spaces/team/members/newbie", w.tokens["adam"])
    for path in ("/api/v1/knowledge-bases", "/api/v1/spaces"):
        r = w.call("GET", path, tok)
        assert r.status_code == 403 and r.json()["error_code"] == "SPACE_FORBIDDEN", (path, r.text)


def test_users_are_for_the_machine_owner_only(world):
    w = world
    for tok in ("olga", "ozzy", "olga_ro"):
        error(w.call("GET", "/api/v1/users", w.tokens[tok]), 403, "machine's owner")
        error(w.call("POST", "/api/v1/users", w.tokens[tok], {"name": "sneaky"}), 403, "machine's owner")
    assert "sneaky" not in {u["name"] for u in w.ok("GET", "/api/v1/users")["data"]}


def test_token_users_create_spaces_they_own_but_their_token_does_not_gain(world):
    w = world
    error(w.call("POST", "/api/v1/spaces", w.tokens["olga_ro"], {"name": "lab"}), 403, "read-only")
    doc = w.ok("POST", "/api/v1/spaces", w.tokens["vic"], {"name": "lab", "description": "Vic's lab"}, status=201)
    s = doc["data"]
    assert (s["name"], s["role"], s["members"], s["in_token"]) == ("lab", "owner", 1, False), s
    assert "token" in s["note"] and "quarry token create --user vic --spaces lab" in s["note"], s
    # Not in the creating token's view...
    assert [x["name"] for x in w.ok("GET", "/api/v1/spaces", w.tokens["vic"])["data"]] == ["team"]
    error(w.call("GET", "/api/v1/spaces/lab/members", w.tokens["vic"]), 404)
    # ...but vic owns it: a token naming it shows it, with vic as owner.
    lab_tok = w.token("vic", "--spaces", "lab", "--manage")
    assert [(x["name"], x["role"]) for x in w.ok("GET", "/api/v1/spaces", lab_tok)["data"]] == [("lab", "owner")]
    members = w.ok("GET", "/api/v1/spaces/lab/members", lab_tok)["data"]
    assert [(m["user"], m["role"]) for m in members] == [("vic", "owner")]
    # An owner through that token deletes it.
    w.ok("DELETE", "/api/v1/spaces/lab", lab_tok)
    r = w.call("GET", "/api/v1/spaces", lab_tok)
    assert r.status_code == 401 and r.json()["error_code"] == "TOKEN_REVOKED", r.text


def test_deleting_spaces(world):
    w = world
    error(w.call("DELETE", "/api/v1/spaces/team", w.tokens["adam"]), 403, "owner role")
    error(w.call("DELETE", "/api/v1/spaces/team", w.tokens["olga_ro"]), 403, "read-only")
    w.call("GET", "/status")  # the default space exists once the server has been used
    error(w.call("DELETE", "/api/v1/spaces/default"), 400, "default space cannot be deleted")
    error(w.call("DELETE", "/api/v1/spaces/nowhere"), 404, "space 'nowhere' not found")

    # A space with a knowledge base needs force=true; then everything in it goes.
    w.ok("POST", "/api/v1/spaces", body={"name": "doomed"}, status=201)
    w.ok("PUT", "/api/v1/spaces/doomed/members/ozzy", body={"role": "owner"})
    w.ok("PUT", "/api/v1/spaces/doomed/members/eve", body={"role": "editor"})
    ozzy = w.token("ozzy", "--spaces", "doomed", "--manage")
    eve_both = w.token("eve", "--spaces", "team,doomed")
    kb = w.ok("POST", "/api/v1/knowledge-bases", ozzy, {"name": "plans"}, status=201)["data"]
    detail = error(w.call("DELETE", "/api/v1/spaces/doomed", ozzy), 409, "plans")
    assert "force=true" in detail, detail
    error(w.call("DELETE", "/api/v1/spaces/doomed?force=maybe", ozzy), 400, "force")
    doc = w.ok("DELETE", "/api/v1/spaces/doomed", ozzy, params={"force": "true"})
    assert doc["data"]["deleted"] is True and doc["data"]["collections_removed"] == 1, doc
    assert doc["data"]["name"] == "doomed"
    error(w.call("GET", "/api/v1/spaces/doomed"), 404)
    assert "doomed" not in {s["name"] for s in w.ok("GET", "/api/v1/spaces")["data"]}
    # Tokens lose the space: one left with none is revoked, one with another space keeps it.
    r = w.call("GET", "/api/v1/spaces", ozzy)
    assert r.status_code == 401 and r.json()["error_code"] == "TOKEN_REVOKED", r.text
    assert [s["name"] for s in w.ok("GET", "/api/v1/spaces", eve_both)["data"]] == ["team"]
    error(w.call("GET", f"/api/v1/knowledge-bases/{kb['id']}"), 404)
    users = {u["name"]: u for u in w.ok("GET", "/api/v1/users")["data"]}
    assert all(s["space"] != "doomed" for s in users["ozzy"]["spaces"])


def test_auth_server_needs_a_token(world, tmp_path):
    srv = start_server(world.home, "--auth", "token", logdir=tmp_path / "logs")
    try:
        for method, path in (("GET", "/api/v1/spaces"), ("GET", "/api/v1/users"), ("POST", "/api/v1/spaces")):
            r = requests.request(method, srv.url(path), json={"name": "x"} if method == "POST" else None, timeout=30)
            assert r.status_code == 401 and r.json()["error_code"] == "AUTH_REQUIRED", (path, r.text)
        r = requests.get(srv.url("/api/v1/spaces"), headers={"Authorization": f"Bearer {world.tokens['olga']}"}, timeout=30)
        assert r.status_code == 200 and [s["name"] for s in r.json()["data"]] == ["team"], r.text
        r = requests.get(srv.url("/api/v1/users"), headers={"Authorization": f"Bearer {world.tokens['olga']}"}, timeout=30)
        assert r.status_code == 403, r.text
    finally:
        srv.stop()


def test_openapi_documents_the_routes(world):
    r = world.call("GET", "/api/v1/openapi.json", None, None)
    assert r.status_code == 200, r.text
    paths = r.json()["paths"]
    for route, methods in (
        ("/api/v1/spaces", {"get", "post"}),
        ("/api/v1/spaces/{id}", {"get", "delete"}),
        ("/api/v1/spaces/{id}/members", {"get"}),
        ("/api/v1/spaces/{id}/members/{user}", {"put", "delete"}),
        ("/api/v1/users", {"get", "post"}),
    ):
        assert route in paths and methods <= set(paths[route]), route
