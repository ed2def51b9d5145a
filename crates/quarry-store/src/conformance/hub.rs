//! Conformance cases for the tool hub's registry (`HubStore`). Each case is a `pub fn hub_…(store: &dyn Store)`
//! listed in the macro below.

use quarry_core::Error;

use crate::{CustomToolRow, PackageRow, Store, ToolEndpointRow, ToolRow, UpstreamRow};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_hub {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::hub];
            hub_upstreams_round_trip_and_update,
            hub_upstream_names_and_packages_conflict_per_owner,
            hub_deleting_an_upstream_takes_its_package_and_tools,
            hub_replace_package_replaces_every_tool,
            hub_tool_conflicts_change_nothing,
            hub_delete_package_spares_upstream_packages,
            hub_generation_moves_with_every_change_of_its_owner_only,
            hub_disabled_tools_toggle_per_owner,
            hub_custom_tools_round_trip_and_conflicts,
            hub_tool_endpoints_round_trip_rename_and_conflicts,
            hub_concurrent_changes_serialise,
        );
    };
}

#[doc(hidden)]
pub use __conformance_hub;

/// Secrets as a client might send them: quotes, backslashes, newlines, non-ASCII.
const SECRET: &str = "{\"env\":{\"K\":\"s3cr\\\"et \\\\ \\n ünï 🔑\"},\"headers\":{}}";

fn upstream(owner: &str, id: &str, name: &str) -> (UpstreamRow, PackageRow) {
    (
        UpstreamRow {
            id: id.into(),
            owner: owner.into(),
            name: name.into(),
            package: name.into(),
            transport: "stdio".into(),
            config: "uvx mcp-server-time".into(),
            options: r#"{"args":["--tz","UTC"]}"#.into(),
            secrets: SECRET.into(),
            enabled: true,
            created_at: 10,
            updated_at: 10,
        },
        PackageRow {
            owner: owner.into(),
            id: name.into(),
            name: name.into(),
            description: String::new(),
            category: "c".into(),
            tags: vec!["a".into(), "b c".into()],
            kind: "upstream".into(),
            upstream_id: Some(id.into()),
            source: "legacy".into(),
            schema_version: "legacy".into(),
            manifest: None,
            updated_at: 10,
            surface: None,
        },
    )
}

fn custom_package(owner: &str, id: &str) -> PackageRow {
    PackageRow {
        owner: owner.into(),
        id: id.into(),
        name: format!("The {id} tools"),
        description: "what they do".into(),
        category: "web".into(),
        tags: Vec::new(),
        kind: "custom".into(),
        upstream_id: None,
        source: "manifest".into(),
        schema_version: "1.0".into(),
        manifest: Some(r#"{"manifestSchemaVersion":"1.0"}"#.into()),
        updated_at: 20,
        surface: Some(r#"{"resources":[]}"#.into()),
    }
}

fn tool(owner: &str, package: &str, name: &str) -> ToolRow {
    ToolRow {
        owner: owner.into(),
        package: package.into(),
        tool: name.into(),
        full_name: format!("{package}.{name}"),
        description: format!("does {name}"),
        input_schema: r#"{"type":"object"}"#.into(),
        raw: format!(r#"{{"name":"{name}"}}"#),
        category: "c".into(),
        tags: Vec::new(),
        source: "legacy".into(),
        schema_version: "legacy".into(),
        requires_task: false,
        updated_at: 30,
    }
}

fn custom(owner: &str, id: &str, name: &str) -> CustomToolRow {
    CustomToolRow {
        id: id.into(),
        owner: owner.into(),
        name: name.into(),
        spec: r#"{"method":"GET","url":"https://example.com"}"#.into(),
        secrets: SECRET.into(),
        enabled: true,
        created_at: 40,
        updated_at: 40,
    }
}

fn generation(store: &dyn Store, owner: &str) -> i64 {
    store.hub_generation(owner).expect("hub_generation")
}

fn names(tools: &[ToolRow]) -> Vec<&str> {
    tools.iter().map(|t| t.full_name.as_str()).collect()
}

#[track_caller]
fn expect_conflict<T: std::fmt::Debug>(what: &str, r: quarry_core::Result<T>) -> String {
    match r {
        Err(Error::Conflict(m)) => m,
        other => panic!("{what}: expected Conflict, got {other:?}"),
    }
}

#[track_caller]
fn expect_not_found<T: std::fmt::Debug>(what: &str, r: quarry_core::Result<T>) {
    match r {
        Err(Error::NotFound(_)) => {}
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
}

/// An upstream reads back exactly as registered (secrets byte for byte), by id and in the
/// listings (its owner's, everyone's, in order of creation); an update replaces its name,
/// options, secrets and switch, and nothing else; an update or read by the wrong owner
/// finds nothing.
pub fn hub_upstreams_round_trip_and_update(store: &dyn Store) {
    let (u, p) = upstream("alice", "u1", "time");
    store.insert_upstream(&u, &p).expect("insert_upstream");
    assert_eq!(
        store.upstream("alice", "u1").expect("upstream"),
        Some(u.clone()),
        "the upstream as registered"
    );
    assert_eq!(
        store.upstream("bob", "u1").expect("upstream"),
        None,
        "another owner's upstream is invisible"
    );
    assert_eq!(store.upstream("alice", "nope").expect("upstream"), None);
    assert_eq!(
        store.packages("alice").expect("packages"),
        vec![p.clone()],
        "the upstream's package as registered"
    );
    assert!(store.catalog_tools("alice").expect("catalog").is_empty());

    // Listings: by owner and all, ordered by creation then id.
    let (mut b, bp) = upstream("bob", "u0", "fetch");
    b.created_at = 5;
    store.insert_upstream(&b, &bp).expect("insert bob's");
    let (mut c, cp) = upstream("alice", "u2", "git");
    c.created_at = 10; // same time as u1: the id decides
    c.enabled = false;
    store
        .insert_upstream(&c, &cp)
        .expect("insert alice's second");
    let ids = |owner: Option<&str>| -> Vec<String> {
        store
            .upstreams(owner)
            .expect("upstreams")
            .into_iter()
            .map(|u| u.id)
            .collect()
    };
    assert_eq!(ids(Some("alice")), ["u1", "u2"], "alice's upstreams");
    assert_eq!(ids(Some("bob")), ["u0"], "bob's upstreams");
    assert!(ids(Some("carol")).is_empty(), "carol has none");
    assert_eq!(ids(None), ["u0", "u1", "u2"], "everyone's upstreams");
    assert_eq!(
        store.upstream("alice", "u2").expect("upstream"),
        Some(c),
        "a disabled upstream reads back disabled"
    );

    // Update: the mutable fields change, the others stay.
    let changed = UpstreamRow {
        name: "clock".into(),
        options: r#"{"args":[]}"#.into(),
        secrets: "{}".into(),
        enabled: false,
        updated_at: 99,
        transport: "http".into(),
        config: "https://elsewhere".into(),
        // Not mutable: these stay as registered.
        package: "other".into(),
        created_at: 1,
        ..u.clone()
    };
    store.update_upstream(&changed).expect("update_upstream");
    let got = store
        .upstream("alice", "u1")
        .expect("upstream")
        .expect("still there");
    assert_eq!(
        got,
        UpstreamRow {
            name: "clock".into(),
            options: r#"{"args":[]}"#.into(),
            secrets: "{}".into(),
            enabled: false,
            updated_at: 99,
            transport: "http".into(),
            config: "https://elsewhere".into(),
            ..u.clone()
        },
        "update changes everything but the owner, id, package and creation time"
    );
    expect_not_found(
        "update by another owner",
        store.update_upstream(&UpstreamRow {
            owner: "bob".into(),
            ..changed.clone()
        }),
    );
    expect_not_found(
        "update of an unknown id",
        store.update_upstream(&UpstreamRow {
            id: "nope".into(),
            ..changed.clone()
        }),
    );
    assert_eq!(
        store.upstream("alice", "u1").expect("upstream").as_ref(),
        Some(&got),
        "failed updates changed nothing"
    );

    // Secrets swap only from what the caller read (two nodes refreshing one sign-in: one
    // wins), and leave `updated_at` alone so no node reconnects for it.
    let g = generation(store, "alice");
    assert!(
        store
            .swap_upstream_secrets("u1", "{}", r#"{"oauth":"v1:a"}"#)
            .expect("swap")
    );
    assert!(
        !store
            .swap_upstream_secrets("u1", "{}", r#"{"oauth":"v1:b"}"#)
            .expect("swap"),
        "a swap from stale secrets is refused"
    );
    assert!(
        !store
            .swap_upstream_secrets("nope", "{}", "{}")
            .expect("swap of an unknown id")
    );
    let swapped = store
        .upstream("alice", "u1")
        .expect("upstream")
        .expect("still there");
    assert_eq!(swapped.secrets, r#"{"oauth":"v1:a"}"#);
    assert_eq!(swapped.updated_at, got.updated_at);
    assert_eq!(generation(store, "alice"), g, "secrets are not the catalog");
}

/// Within one owner, an upstream's name and package are unique (`Conflict`, naming the
/// package when the package is taken, even by a package of no upstream); another owner may
/// use the same ones. A refused registration leaves nothing behind; renaming onto a taken
/// name is refused too.
pub fn hub_upstream_names_and_packages_conflict_per_owner(store: &dyn Store) {
    let (u, p) = upstream("alice", "u1", "time");
    store.insert_upstream(&u, &p).expect("insert_upstream");
    store
        .replace_package(&custom_package("alice", "weather"), &[])
        .expect("replace_package");
    let g = generation(store, "alice");

    // Same name (and package) again.
    let (again, again_p) = upstream("alice", "u2", "time");
    let m = expect_conflict(
        "same package twice",
        store.insert_upstream(&again, &again_p),
    );
    assert!(m.contains("time"), "the message names the package: {m}");
    // Same name, another package.
    let (mut renamed, mut renamed_p) = upstream("alice", "u3", "clock");
    renamed.name = "time".into();
    renamed_p.name = "time".into();
    let m = expect_conflict(
        "same name twice",
        store.insert_upstream(&renamed, &renamed_p),
    );
    assert!(m.contains("time"), "the message names the server: {m}");
    // A package of no upstream holds the id.
    let (w, wp) = upstream("alice", "u4", "weather");
    let m = expect_conflict(
        "package taken by a custom package",
        store.insert_upstream(&w, &wp),
    );
    assert_eq!(m, "a package named 'weather' already exists");
    // Same id as an existing upstream.
    let (dup_id, dup_id_p) = upstream("alice", "u1", "fresh");
    expect_conflict("same id twice", store.insert_upstream(&dup_id, &dup_id_p));

    // Nothing of the refused registrations remains.
    let ids: Vec<String> = store
        .upstreams(Some("alice"))
        .expect("upstreams")
        .into_iter()
        .map(|u| u.id)
        .collect();
    assert_eq!(ids, ["u1"], "refused registrations left no upstream");
    let packages: Vec<String> = store
        .packages("alice")
        .expect("packages")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(
        packages,
        ["time", "weather"],
        "refused registrations left no package"
    );
    assert_eq!(
        store.packages("alice").expect("packages")[1],
        custom_package("alice", "weather"),
        "the custom package is untouched"
    );
    assert_eq!(
        generation(store, "alice"),
        g,
        "refused registrations did not move the generation"
    );

    // Another owner may use the same name, package and package id.
    let (b, bp) = upstream("bob", "u9", "time");
    store
        .insert_upstream(&b, &bp)
        .expect("bob may use alice's names");

    // Renaming onto a taken name.
    let (c, cp) = upstream("alice", "u5", "git");
    store.insert_upstream(&c, &cp).expect("insert git");
    let m = expect_conflict(
        "rename onto a taken name",
        store.update_upstream(&UpstreamRow {
            name: "time".into(),
            ..c.clone()
        }),
    );
    assert!(m.contains("time"), "the message names the server: {m}");
    assert_eq!(
        store.upstream("alice", "u5").expect("upstream"),
        Some(c),
        "the refused rename changed nothing"
    );
}

/// Deleting an upstream takes its package and the package's tools along, and only its
/// owner may.
pub fn hub_deleting_an_upstream_takes_its_package_and_tools(store: &dyn Store) {
    let (u, p) = upstream("alice", "u1", "time");
    store.insert_upstream(&u, &p).expect("insert_upstream");
    store
        .replace_package(
            &p,
            &[
                tool("alice", "time", "now"),
                tool("alice", "time", "convert"),
            ],
        )
        .expect("replace_package");
    let (g, gp) = upstream("alice", "u2", "git");
    store.insert_upstream(&g, &gp).expect("insert git");
    store
        .replace_package(&gp, &[tool("alice", "git", "log")])
        .expect("git tools");
    assert!(
        !store.delete_upstream("bob", "u1").expect("delete_upstream"),
        "another owner cannot delete it"
    );
    assert!(
        !store
            .delete_upstream("alice", "nope")
            .expect("delete_upstream"),
        "an unknown id is false"
    );
    assert_eq!(store.catalog_tools("alice").expect("catalog").len(), 3);
    assert!(
        store
            .delete_upstream("alice", "u1")
            .expect("delete_upstream")
    );
    assert_eq!(store.upstream("alice", "u1").expect("upstream"), None);
    assert_eq!(
        names(&store.catalog_tools("alice").expect("catalog")),
        ["git.log"],
        "the upstream's tools went with it, the other's stayed"
    );
    let packages: Vec<String> = store
        .packages("alice")
        .expect("packages")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(packages, ["git"], "the upstream's package went with it");
    assert!(
        !store
            .delete_upstream("alice", "u1")
            .expect("delete_upstream"),
        "deleting twice is false"
    );
    // The package id is free again.
    store
        .insert_upstream(&u, &p)
        .expect("register the same upstream again");
}

/// `replace_package` inserts or replaces a package and all its tools at once: every field
/// reads back (tags, optional manifest and surface, `requires_task`), old tools not in the
/// new list are gone, tools take the package's owner and id, and the listings are ordered
/// (packages by id, tools by package then name, byte order).
pub fn hub_replace_package_replaces_every_tool(store: &dyn Store) {
    let pkg = custom_package("alice", "weather");
    let mut forecast = tool("alice", "weather", "forecast");
    forecast.tags = vec!["x".into(), "y z".into()];
    forecast.requires_task = true;
    forecast.source = "manifest".into();
    forecast.schema_version = "1.0".into();
    let current = tool("alice", "weather", "current");
    store
        .replace_package(&pkg, &[forecast.clone(), current.clone()])
        .expect("replace_package");
    assert_eq!(
        store.packages("alice").expect("packages"),
        vec![pkg.clone()]
    );
    assert_eq!(
        store.catalog_tools("alice").expect("catalog"),
        vec![current.clone(), forecast.clone()],
        "tools read back whole, ordered by name"
    );
    assert!(store.catalog_tools("bob").expect("catalog").is_empty());
    assert!(store.packages("bob").expect("packages").is_empty());

    // Replace: the package's fields change, the tool list is the new one.
    let pkg2 = PackageRow {
        name: "Weather".into(),
        description: String::new(),
        tags: vec!["only".into()],
        manifest: None,
        surface: None,
        updated_at: 21,
        ..pkg.clone()
    };
    let mut alerts = tool("bob", "elsewhere", "alerts"); // owner and package come from the package
    alerts.full_name = "weather.alerts".into();
    let mut forecast2 = forecast.clone();
    forecast2.description = "changed".into();
    forecast2.requires_task = false;
    store
        .replace_package(&pkg2, &[forecast2.clone(), alerts])
        .expect("replace again");
    assert_eq!(
        store.packages("alice").expect("packages"),
        vec![pkg2.clone()]
    );
    let tools = store.catalog_tools("alice").expect("catalog");
    assert_eq!(names(&tools), ["weather.alerts", "weather.forecast"]);
    assert_eq!(
        (tools[0].owner.as_str(), tools[0].package.as_str()),
        ("alice", "weather"),
        "a tool belongs to the package it was stored with"
    );
    assert_eq!(tools[1], forecast2);
    assert!(store.catalog_tools("bob").expect("catalog").is_empty());

    // Ordering in byte order, across packages.
    let other = custom_package("alice", "a-b");
    let upper = tool("alice", "a-b", "Zed");
    let lower = tool("alice", "a-b", "alpha");
    store
        .replace_package(&other, &[lower.clone(), upper.clone()])
        .expect("second package");
    store
        .replace_package(&custom_package("alice", "ab"), &[])
        .expect("third package");
    let ids: Vec<String> = store
        .packages("alice")
        .expect("packages")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids, ["a-b", "ab", "weather"], "packages by id, byte order");
    assert_eq!(
        names(&store.catalog_tools("alice").expect("catalog")),
        ["a-b.Zed", "a-b.alpha", "weather.alerts", "weather.forecast"],
        "tools by package then name, byte order"
    );

    // An empty list empties the package.
    store
        .replace_package(&pkg2, &[])
        .expect("replace with none");
    assert_eq!(
        names(&store.catalog_tools("alice").expect("catalog")),
        ["a-b.Zed", "a-b.alpha"]
    );
}

/// A tool listed twice in one package, or whose full name another package of the owner
/// already has, is `Conflict` naming the tool, and nothing of the replacement lands (the
/// package's fields, its old tools and the generation stay as they were).
pub fn hub_tool_conflicts_change_nothing(store: &dyn Store) {
    let pkg = custom_package("alice", "time");
    store
        .replace_package(
            &pkg,
            &[
                tool("alice", "time", "now"),
                tool("alice", "time", "convert"),
            ],
        )
        .expect("replace_package");
    store
        .replace_package(
            &custom_package("alice", "other"),
            &[tool("alice", "other", "x")],
        )
        .expect("other package");
    let before_tools = store.catalog_tools("alice").expect("catalog");
    let before_packages = store.packages("alice").expect("packages");
    let g = generation(store, "alice");
    let changed = PackageRow {
        name: "changed".into(),
        ..pkg.clone()
    };

    // The same tool name twice.
    let m = expect_conflict(
        "a tool listed twice",
        store.replace_package(
            &changed,
            &[
                tool("alice", "time", "a"),
                tool("alice", "time", "x"),
                tool("alice", "time", "x"),
            ],
        ),
    );
    assert!(
        m.contains("'x'") && m.contains("'time'"),
        "names the tool and the package: {m}"
    );
    // Two names, one full name.
    let mut alias = tool("alice", "time", "y");
    alias.full_name = "time.a".into();
    let m = expect_conflict(
        "two tools with one full name",
        store.replace_package(&changed, &[tool("alice", "time", "a"), alias]),
    );
    assert!(m.contains("'y'"), "names the second tool: {m}");
    // A full name another package has.
    let mut stolen = tool("alice", "time", "z");
    stolen.full_name = "other.x".into();
    let m = expect_conflict(
        "a full name of another package",
        store.replace_package(&changed, &[tool("alice", "time", "b"), stolen]),
    );
    assert!(m.contains("'z'"), "names the tool: {m}");

    assert_eq!(
        store.catalog_tools("alice").expect("catalog"),
        before_tools,
        "refused replacements left the tools as they were"
    );
    assert_eq!(
        store.packages("alice").expect("packages"),
        before_packages,
        "refused replacements left the packages as they were"
    );
    assert_eq!(generation(store, "alice"), g, "nor moved the generation");

    // Another owner has its own full names.
    store
        .replace_package(
            &custom_package("bob", "other"),
            &[tool("bob", "other", "x")],
        )
        .expect("bob's other.x");
    // A package of an upstream that does not exist is refused (not a conflict).
    let orphan = PackageRow {
        upstream_id: Some("no-such-upstream".into()),
        kind: "upstream".into(),
        ..custom_package("alice", "orphan")
    };
    assert!(
        store.replace_package(&orphan, &[]).is_err(),
        "a package of an unknown upstream"
    );
    assert_eq!(store.packages("alice").expect("packages"), before_packages);
}

/// `delete_package` removes a package of no upstream (with its tools) and refuses (false)
/// an upstream's package, an unknown id and another owner's package.
pub fn hub_delete_package_spares_upstream_packages(store: &dyn Store) {
    let (u, p) = upstream("alice", "u1", "time");
    store.insert_upstream(&u, &p).expect("insert_upstream");
    store
        .replace_package(&p, &[tool("alice", "time", "now")])
        .expect("upstream tools");
    let weather = custom_package("alice", "weather");
    store
        .replace_package(&weather, &[tool("alice", "weather", "forecast")])
        .expect("custom tools");
    assert!(
        !store
            .delete_package("alice", "time")
            .expect("delete_package"),
        "an upstream's package stays"
    );
    assert!(
        !store
            .delete_package("bob", "weather")
            .expect("delete_package"),
        "another owner's package stays"
    );
    assert!(
        !store
            .delete_package("alice", "nope")
            .expect("delete_package"),
        "an unknown package is false"
    );
    assert_eq!(store.packages("alice").expect("packages").len(), 2);
    assert!(
        store
            .delete_package("alice", "weather")
            .expect("delete_package")
    );
    assert_eq!(
        names(&store.catalog_tools("alice").expect("catalog")),
        ["time.now"],
        "the package's tools went with it"
    );
    assert_eq!(store.packages("alice").expect("packages"), vec![p]);
    assert!(
        !store
            .delete_package("alice", "weather")
            .expect("delete_package"),
        "deleting twice is false"
    );
    assert!(store.upstream("alice", "u1").expect("upstream").is_some());
}

/// The generation starts at 0 and grows with every change to the owner's hub (upstreams,
/// packages, toggles, custom tools); another owner's changes leave it alone.
pub fn hub_generation_moves_with_every_change_of_its_owner_only(store: &dyn Store) {
    assert_eq!(generation(store, "alice"), 0, "a fresh owner's generation");
    let mut last = 0;
    let mut step = |what: &str, store: &dyn Store| {
        let now = generation(store, "alice");
        assert!(now > last, "{what} moved the generation ({last} → {now})");
        assert_eq!(generation(store, "bob"), 0, "{what} left bob's alone");
        last = now;
    };
    let (u, p) = upstream("alice", "u1", "time");
    store.insert_upstream(&u, &p).expect("insert_upstream");
    step("insert_upstream", store);
    store
        .update_upstream(&UpstreamRow {
            enabled: false,
            ..u.clone()
        })
        .expect("update_upstream");
    step("update_upstream", store);
    store
        .replace_package(&p, &[tool("alice", "time", "now")])
        .expect("replace_package");
    step("replace_package", store);
    store
        .replace_package(&custom_package("alice", "w"), &[])
        .expect("replace_package");
    step("replace_package (new)", store);
    assert!(store.delete_package("alice", "w").expect("delete_package"));
    step("delete_package", store);
    store
        .set_tool_disabled("alice", "time.now", true)
        .expect("set_tool_disabled");
    step("set_tool_disabled (off)", store);
    store
        .set_tool_disabled("alice", "time.now", false)
        .expect("set_tool_disabled");
    step("set_tool_disabled (on)", store);
    let c = custom("alice", "c1", "weather");
    store.insert_custom_tool(&c).expect("insert_custom_tool");
    step("insert_custom_tool", store);
    store
        .update_custom_tool(&CustomToolRow {
            enabled: false,
            ..c.clone()
        })
        .expect("update_custom_tool");
    step("update_custom_tool", store);
    assert!(store.delete_custom_tool("alice", "c1").expect("delete"));
    step("delete_custom_tool", store);
    assert!(store.delete_upstream("alice", "u1").expect("delete"));
    step("delete_upstream", store);

    // Bob's changes are his own.
    store
        .set_tool_disabled("bob", "x.y", true)
        .expect("set_tool_disabled");
    assert!(generation(store, "bob") > 0, "bob's change moved his");
    assert_eq!(
        generation(store, "alice"),
        last,
        "bob's change left alice's"
    );
}

/// Switching a tool off is idempotent and per owner; switching it on again (or one never
/// switched off) is fine. The list is in byte order.
pub fn hub_disabled_tools_toggle_per_owner(store: &dyn Store) {
    assert!(store.disabled_tools("alice").expect("disabled").is_empty());
    store
        .set_tool_disabled("alice", "time.now", true)
        .expect("off");
    store
        .set_tool_disabled("alice", "time.now", true)
        .expect("off again");
    store
        .set_tool_disabled("alice", "a-b.Z", true)
        .expect("off");
    store
        .set_tool_disabled("alice", "a-b.a", true)
        .expect("off");
    store.set_tool_disabled("alice", "ab.x", true).expect("off");
    assert_eq!(
        store.disabled_tools("alice").expect("disabled"),
        ["a-b.Z", "a-b.a", "ab.x", "time.now"],
        "once each, in byte order"
    );
    assert!(
        store.disabled_tools("bob").expect("disabled").is_empty(),
        "per owner"
    );
    store
        .set_tool_disabled("bob", "never.off", false)
        .expect("on, never off");
    store
        .set_tool_disabled("alice", "time.now", false)
        .expect("on");
    store
        .set_tool_disabled("alice", "time.now", false)
        .expect("on again");
    assert_eq!(
        store.disabled_tools("alice").expect("disabled"),
        ["a-b.Z", "a-b.a", "ab.x"]
    );
    assert!(store.disabled_tools("bob").expect("disabled").is_empty());
}

/// Custom tools read back exactly (secrets byte for byte), sorted by name in byte order;
/// names are unique per owner (`Conflict`, on insert and on rename); an update replaces
/// name, spec, secrets and switch; another owner can neither update nor delete one.
pub fn hub_custom_tools_round_trip_and_conflicts(store: &dyn Store) {
    let c1 = custom("alice", "c1", "weather");
    store.insert_custom_tool(&c1).expect("insert_custom_tool");
    assert_eq!(
        store.custom_tools("alice").expect("custom"),
        vec![c1.clone()]
    );
    assert!(store.custom_tools("bob").expect("custom").is_empty());
    let m = expect_conflict(
        "same name twice",
        store.insert_custom_tool(&CustomToolRow {
            id: "c2".into(),
            ..c1.clone()
        }),
    );
    assert!(m.contains("weather"), "names the tool: {m}");
    expect_conflict(
        "same id twice",
        store.insert_custom_tool(&CustomToolRow {
            name: "fresh".into(),
            ..c1.clone()
        }),
    );
    store
        .insert_custom_tool(&custom("bob", "c3", "weather"))
        .expect("bob may use the name");
    let c4 = custom("alice", "c4", "Zebra");
    let c5 = custom("alice", "c5", "apple");
    store.insert_custom_tool(&c4).expect("insert");
    store.insert_custom_tool(&c5).expect("insert");
    let listed: Vec<String> = store
        .custom_tools("alice")
        .expect("custom")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(listed, ["Zebra", "apple", "weather"], "by name, byte order");

    // Update.
    let changed = CustomToolRow {
        name: "weather-2".into(),
        spec: "{}".into(),
        secrets: "{\"headers\":{\"Authorization\":\"Bearer ü\"}}".into(),
        enabled: false,
        updated_at: 77,
        created_at: 1, // not mutable
        ..c1.clone()
    };
    store
        .update_custom_tool(&changed)
        .expect("update_custom_tool");
    let got = store
        .custom_tools("alice")
        .expect("custom")
        .into_iter()
        .find(|t| t.id == "c1")
        .expect("c1");
    assert_eq!(
        got,
        CustomToolRow {
            created_at: c1.created_at,
            ..changed.clone()
        },
        "update changes name, spec, secrets, enabled and updated_at"
    );
    let m = expect_conflict(
        "rename onto a taken name",
        store.update_custom_tool(&CustomToolRow {
            name: "apple".into(),
            ..changed.clone()
        }),
    );
    assert!(m.contains("apple"), "names the tool: {m}");
    expect_not_found(
        "update by another owner",
        store.update_custom_tool(&CustomToolRow {
            owner: "bob".into(),
            ..changed.clone()
        }),
    );
    expect_not_found(
        "update of an unknown id",
        store.update_custom_tool(&CustomToolRow {
            id: "nope".into(),
            ..changed.clone()
        }),
    );
    assert!(
        store.custom_tools("alice").expect("custom").contains(&got),
        "refused updates changed nothing"
    );

    // Delete.
    assert!(!store.delete_custom_tool("bob", "c1").expect("delete"));
    assert!(!store.delete_custom_tool("alice", "nope").expect("delete"));
    assert!(store.delete_custom_tool("alice", "c1").expect("delete"));
    assert!(!store.delete_custom_tool("alice", "c1").expect("delete"));
    let listed: Vec<String> = store
        .custom_tools("alice")
        .expect("custom")
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(listed, ["c4", "c5"]);
    assert_eq!(store.custom_tools("bob").expect("custom").len(), 1);
}

/// Two nodes changing one owner's hub at once: two registrations of one package, one wins
/// and the other is `Conflict`; two replacements of one package end with one tool list,
/// never a mix; concurrent toggles all land and the generation grows.
pub fn hub_concurrent_changes_serialise(store: &dyn Store) {
    // One package, two upstreams racing for it, over several rounds.
    for round in 0..5 {
        let package = format!("p{round}");
        let (mut a, mut ap) = upstream("alice", &format!("a{round}"), &package);
        let (mut b, mut bp) = upstream("alice", &format!("b{round}"), &package);
        a.name = format!("a{round}");
        b.name = format!("b{round}");
        // Distinct upstream `package` columns, so only the package's key can stop the loser.
        a.package = format!("{package}-a");
        b.package = format!("{package}-b");
        ap.upstream_id = Some(a.id.clone());
        bp.upstream_id = Some(b.id.clone());
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| store.insert_upstream(&a, &ap));
            let tb = s.spawn(|| store.insert_upstream(&b, &bp));
            (ta.join().expect("thread a"), tb.join().expect("thread b"))
        });
        let wins = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert_eq!(
            wins, 1,
            "round {round}: one registration wins: {ra:?} {rb:?}"
        );
        for r in [ra, rb] {
            if let Err(e) = r {
                assert!(
                    matches!(e, Error::Conflict(_)),
                    "round {round}: the loser is Conflict: {e:?}"
                );
            }
        }
        let owners: Vec<String> = store
            .upstreams(Some("alice"))
            .expect("upstreams")
            .into_iter()
            .filter(|u| u.package.starts_with(&format!("{package}-")))
            .map(|u| u.id)
            .collect();
        assert_eq!(
            owners.len(),
            1,
            "round {round}: one upstream registered: {owners:?}"
        );
        let pkg = store
            .packages("alice")
            .expect("packages")
            .into_iter()
            .find(|p| p.id == package)
            .expect("the package");
        assert_eq!(
            pkg.upstream_id.as_deref(),
            Some(owners[0].as_str()),
            "round {round}: the package belongs to the winner"
        );
    }

    // Two replacements of one package: the result is one list or the other.
    let pkg = custom_package("alice", "race");
    let list = |prefix: &str| -> Vec<ToolRow> {
        (0..20)
            .map(|i| tool("alice", "race", &format!("{prefix}{i:02}")))
            .collect()
    };
    let (left, right) = (list("l"), list("r"));
    for round in 0..5 {
        let (ra, rb) = std::thread::scope(|s| {
            let ta = s.spawn(|| store.replace_package(&pkg, &left));
            let tb = s.spawn(|| store.replace_package(&pkg, &right));
            (ta.join().expect("thread a"), tb.join().expect("thread b"))
        });
        ra.expect("replace left");
        rb.expect("replace right");
        let got: Vec<ToolRow> = store
            .catalog_tools("alice")
            .expect("catalog")
            .into_iter()
            .filter(|t| t.package == "race")
            .collect();
        assert!(
            got == left || got == right,
            "round {round}: one list, not a mix: {:?}",
            names(&got)
        );
    }

    // Concurrent toggles.
    let before = generation(store, "alice");
    std::thread::scope(|s| {
        for worker in 0..4 {
            s.spawn(move || {
                for i in 0..10 {
                    store
                        .set_tool_disabled("alice", &format!("t.w{worker}-{i}"), true)
                        .expect("set_tool_disabled");
                }
            });
        }
    });
    assert_eq!(
        store.disabled_tools("alice").expect("disabled").len(),
        40,
        "every toggle landed"
    );
    assert!(
        generation(store, "alice") > before,
        "the toggles moved the generation"
    );
}

fn endpoint(id: &str, name: &str, owner: &str) -> ToolEndpointRow {
    ToolEndpointRow {
        id: id.into(),
        name: name.into(),
        owner: owner.into(),
        selection: "servers=time&pin=git.git_status&mode=search".into(),
        description: "Ops tools – ünï".into(),
        created_by: Some("u-1".into()),
        created_at: 10,
        updated_at: 10,
    }
}

/// Named endpoints: stored and read back by name and by owner, renamed, names unique per
/// owner (not on the server), removed.
pub fn hub_tool_endpoints_round_trip_rename_and_conflicts(store: &dyn Store) {
    let u1 = |extra: &[&str]| -> Vec<String> {
        std::iter::once("user:u-1")
            .chain(extra.iter().copied())
            .map(str::to_owned)
            .collect()
    };
    let ops = endpoint("e1", "ops", "user:u-1");
    store.insert_tool_endpoint(&ops).expect("insert");
    store
        .insert_tool_endpoint(&endpoint("e2", "team-ops", "space:s-1"))
        .expect("insert");
    store
        .insert_tool_endpoint(&endpoint("e3", "other", "user:u-2"))
        .expect("insert");
    assert_eq!(
        store.tool_endpoint(&u1(&[]), "ops").expect("read"),
        Some(ops.clone())
    );
    assert_eq!(store.tool_endpoint(&u1(&[]), "nope").expect("read"), None);
    // Another owner's endpoint is not found through these owners.
    assert_eq!(store.tool_endpoint(&u1(&[]), "other").expect("read"), None);
    let mine: Vec<String> = store
        .tool_endpoints(&u1(&["space:s-1"]))
        .expect("list")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(mine, ["ops", "team-ops"]);
    assert!(store.tool_endpoints(&[]).expect("list").is_empty());
    // Names are unique per owner: another owner takes "ops" too, the same owner cannot.
    let theirs = endpoint("e4", "ops", "user:u-2");
    store
        .insert_tool_endpoint(&theirs)
        .expect("another owner's ops");
    expect_conflict(
        "a name its owner already has",
        store.insert_tool_endpoint(&endpoint("e5", "ops", "user:u-1")),
    );
    let space_ops = endpoint("e6", "ops", "space:s-1");
    store
        .insert_tool_endpoint(&space_ops)
        .expect("a space's ops");
    // One name, several owners: the first owner listed wins.
    assert_eq!(
        store
            .tool_endpoint(&u1(&["space:s-1"]), "ops")
            .expect("read"),
        Some(ops.clone())
    );
    assert_eq!(
        store
            .tool_endpoint(&["space:s-1".into(), "user:u-1".into()], "ops")
            .expect("read"),
        Some(space_ops.clone())
    );
    assert_eq!(
        store
            .tool_endpoint(&["user:u-2".into()], "ops")
            .expect("read"),
        Some(theirs)
    );
    let renamed = ToolEndpointRow {
        name: "ops-2".into(),
        selection: "tools=time.get_current_time".into(),
        description: String::new(),
        updated_at: 20,
        ..ops.clone()
    };
    store.update_tool_endpoint(&renamed).expect("update");
    assert_eq!(store.tool_endpoint(&u1(&[]), "ops").expect("read"), None);
    assert_eq!(
        store.tool_endpoint(&u1(&[]), "ops-2").expect("read"),
        Some(renamed.clone())
    );
    store
        .insert_tool_endpoint(&endpoint("e7", "mine", "user:u-1"))
        .expect("insert");
    expect_conflict(
        "renaming onto a name its owner has",
        store.update_tool_endpoint(&ToolEndpointRow {
            name: "mine".into(),
            ..renamed.clone()
        }),
    );
    // Renaming onto another owner's name is no conflict.
    store
        .update_tool_endpoint(&ToolEndpointRow {
            name: "other".into(),
            ..renamed.clone()
        })
        .expect("rename onto another owner's name");
    expect_not_found(
        "updating a missing endpoint",
        store.update_tool_endpoint(&endpoint("e9", "ghost", "user:u-1")),
    );
    assert!(store.delete_tool_endpoint("e1").expect("delete"));
    assert!(!store.delete_tool_endpoint("e1").expect("delete again"));
    assert_eq!(store.tool_endpoint(&u1(&[]), "other").expect("read"), None);
}
