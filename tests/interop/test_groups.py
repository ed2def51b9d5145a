"""Groups of users in a space (`quarry group …`), end to end through the real binary.

The CLI acts as the machine's owner of the space `--space` names (or ``QUARRY_SPACE``): it
creates, lists, deletes groups and changes their members, with the same rules and messages as
``/api/v1/groups`` (docs/access-api.md): names are checked, unique per space; only members of
the space join its groups; a user who leaves the space or is removed leaves its groups. Then a
token-mode server shows a member what the CLI made, and only the groups of the token's space.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import requests
from conftest import QuarryHome, make_home, start_server

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def ok(home: QuarryHome, *args: str) -> str:
    r = home.run(*args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def fails(home: QuarryHome, *args: str, fragment: str) -> None:
    r = home.run(*args)
    assert r.returncode != 0, (args, r.stdout)
    assert fragment in r.stderr, (args, r.stderr)


def team(quarry_bin: Path, corpus: Path, tmp_path: Path) -> QuarryHome:
    home = make_home(quarry_bin, corpus, tmp_path / "home")
    for args in (
        ("space", "create", "team"),
        ("space", "create", "lab"),
        ("user", "add", "ann"),
        ("user", "add", "bob"),
        ("user", "add", "zed"),
        ("space", "grant", "team", "ann", "--role", "editor"),
        ("space", "grant", "team", "bob", "--role", "viewer"),
        ("space", "grant", "lab", "zed", "--role", "owner"),
    ):
        ok(home, *args)
    return home


def groups(home: QuarryHome, *space: str) -> dict[str, list[str]]:
    listed = json.loads(ok(home, "--json", "group", "list", *space))
    return {g["name"]: g["members"] for g in listed}


def test_group_commands_manage_a_spaces_groups(quarry_bin: Path, corpus: Path, tmp_path: Path):
    home = team(quarry_bin, corpus, tmp_path)
    out = ok(home, "group", "create", "eng", "--space", "team", "--description", "the engineers")
    m = re.fullmatch(r"Created group 'eng' in space 'team' \((\S+)\)\n", out)
    assert m and UUID_RE.match(m.group(1)), out
    eng_id = m.group(1)
    created = json.loads(ok(home, "--json", "group", "create", "ops", "--space", "team"))
    assert set(created) == {"id", "name", "description", "created_at", "members"}, created
    assert created["members"] == [] and created["description"] == ""

    # Members of the space join; the space comes from QUARRY_SPACE as well as --space.
    in_team = home.with_env(QUARRY_SPACE="team")
    out = ok(in_team, "group", "add", "eng", "bob", "ann", "bob")
    assert out == "Group 'eng' of space 'team': ann, bob\n", out
    assert ok(in_team, "group", "add", eng_id, "ann") == out, "by UUID, and again changes nothing"
    out = ok(in_team, "group", "list")
    lines = out.splitlines()
    assert lines[0] == f"eng  {eng_id}  ann bob", out
    assert lines[1].startswith("ops  ") and len(lines) == 2, out
    listed = json.loads(ok(in_team, "--json", "group", "list"))
    assert [g["name"] for g in listed] == ["eng", "ops"]
    assert listed[0] | {"created_at": 0} == {
        "id": eng_id, "name": "eng", "description": "the engineers", "members": ["ann", "bob"], "created_at": 0,
    }
    # Another space's groups are its own.
    assert "No groups in space 'lab'" in ok(home, "group", "list", "--space", "lab")
    assert groups(home) == {}

    # Refusals name what is wrong and change nothing.
    fails(in_team, "group", "create", "eng", fragment="space 'team' already has a group 'eng'")
    fails(in_team, "group", "create", "a b", fragment='invalid group name "a b"')
    fails(in_team, "group", "add", "eng", "zed", fragment="user 'zed' is not a member of space 'team'")
    fails(in_team, "group", "add", "eng", "ghost", fragment="user 'ghost' not found")
    fails(in_team, "group", "add", "nope", "ann", fragment="group 'nope' not found in space 'team'")
    fails(in_team, "group", "remove", "ops", "ann", fragment="user 'ann' is not in group 'ops' of space 'team'")
    r = in_team.run("group", "add", "eng")
    assert r.returncode == 2 and "<USERS>" in r.stderr, r.stderr
    assert groups(in_team) == {"eng": ["ann", "bob"], "ops": []}

    out = ok(in_team, "group", "remove", "eng", "ann")
    assert out == "Group 'eng' of space 'team': bob\n", out
    gone = json.loads(ok(in_team, "--json", "group", "delete", "ops"))
    assert gone["deleted"]["name"] == "ops", gone
    assert ok(in_team, "group", "rm", "eng") == "Deleted group 'eng' of space 'team'\n"
    fails(in_team, "group", "delete", "eng", fragment="group 'eng' not found in space 'team'")
    assert groups(in_team) == {}


def test_leaving_the_space_or_the_server_leaves_its_groups(quarry_bin: Path, corpus: Path, tmp_path: Path):
    home = team(quarry_bin, corpus, tmp_path)
    in_team = home.with_env(QUARRY_SPACE="team")
    ok(in_team, "group", "create", "eng")
    ok(in_team, "group", "add", "eng", "ann", "bob")
    ok(home, "space", "grant", "lab", "bob")
    ok(home, "group", "create", "eng", "--space", "lab")
    ok(home, "group", "add", "eng", "bob", "zed", "--space", "lab")

    ok(home, "space", "revoke", "team", "ann")
    assert groups(in_team) == {"eng": ["bob"]}
    ok(home, "space", "grant", "team", "ann")
    assert groups(in_team) == {"eng": ["bob"]}, "joining again brings no group back"
    ok(home, "user", "rm", "bob")
    assert groups(in_team) == {"eng": []}
    assert groups(home, "--space", "lab") == {"eng": ["zed"]}
    ok(home, "space", "rm", "lab", "--yes")
    ok(home, "space", "create", "lab")
    assert groups(home, "--space", "lab") == {}


def test_a_member_sees_the_groups_of_its_tokens_space_over_rest(quarry_bin: Path, corpus: Path, tmp_path: Path):
    home = team(quarry_bin, corpus, tmp_path)
    ok(home, "group", "create", "eng", "--space", "team")
    ok(home, "group", "add", "eng", "bob", "--space", "team")
    ok(home, "group", "create", "secret", "--space", "lab")
    bob = json.loads(ok(home, "--json", "token", "create", "--user", "bob", "--spaces", "team"))["token"]
    zed = json.loads(ok(home, "--json", "token", "create", "--user", "zed", "--spaces", "lab"))["token"]
    srv = start_server(home, "--auth", "token", logdir=tmp_path / "logs")
    try:
        r = requests.get(srv.url("/api/v1/groups"), headers={"Authorization": f"Bearer {bob}"}, timeout=30)
        assert r.status_code == 200, r.text
        assert [(g["name"], g["members"]) for g in r.json()["data"]] == [("eng", ["bob"])]
        # A viewer lists, never changes.
        r = requests.post(srv.url("/api/v1/groups"), json={"name": "ops"},
                          headers={"Authorization": f"Bearer {bob}"}, timeout=30)
        assert r.status_code == 403 and r.json()["error_code"] == "FORBIDDEN", r.text
        r = requests.get(srv.url("/api/v1/groups"), headers={"Authorization": f"Bearer {zed}"}, timeout=30)
        assert [g["name"] for g in r.json()["data"]] == ["secret"], r.text
        r = requests.get(srv.url("/api/v1/groups/eng"), headers={"Authorization": f"Bearer {zed}"}, timeout=30)
        assert r.status_code == 404 and r.json()["error_code"] == "NOT_FOUND", r.text
    finally:
        srv.stop()
