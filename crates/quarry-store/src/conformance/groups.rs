//! Conformance cases for groups of users per space (`AccessStore`'s group methods). Each case
//! is a `pub fn groups_…(store: &dyn Store)` listed in the macro below.

use quarry_core::Error;

use crate::{Role, Store};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_groups {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::groups];
            groups_are_unique_per_space_and_found_by_name_or_uuid,
            groups_members_are_added_once_and_listed_by_name,
            groups_deleting_a_group_takes_its_memberships,
            groups_go_with_their_user_their_space_and_a_left_membership,
            groups_racing_creations_and_additions_have_one_result,
        );
    };
}

#[doc(hidden)]
pub use __conformance_groups;

fn space(store: &dyn Store, name: &str) {
    store
        .create_space(name, "")
        .unwrap_or_else(|e| panic!("create_space {name}: {e}"));
}

/// A user that is a viewer of `spaces`; its row id.
fn member(store: &dyn Store, name: &str, spaces: &[&str]) -> i64 {
    store
        .create_user(name)
        .unwrap_or_else(|e| panic!("create_user {name}: {e}"));
    let row = store
        .user(name)
        .expect("user")
        .unwrap_or_else(|| panic!("user {name} just created is not found"))
        .0;
    for s in spaces {
        store.grant(row, s, Role::Viewer).expect("grant");
    }
    row
}

fn names(store: &dyn Store, space: &str) -> Vec<(String, Vec<String>)> {
    store
        .groups(space)
        .expect("groups")
        .into_iter()
        .map(|g| (g.name, g.members))
        .collect()
}

fn members(store: &dyn Store, space: &str, group: &str) -> Vec<String> {
    store
        .group(space, group)
        .expect("group")
        .unwrap_or_else(|| panic!("group {group} of {space} is not found"))
        .members
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// A group has a name unique within its space and its own UUID; it is found by either in
/// its space only, listed by name in byte order. A group in a missing space is `NotFound`,
/// a taken name `Conflict`.
pub fn groups_are_unique_per_space_and_found_by_name_or_uuid(store: &dyn Store) {
    space(store, "a");
    space(store, "b");
    let eng = store
        .create_group("a", "eng", "the engineers")
        .expect("create_group");
    assert_eq!(
        (
            eng.space.as_str(),
            eng.name.as_str(),
            eng.description.as_str()
        ),
        ("a", "eng", "the engineers")
    );
    assert_eq!(eng.id.len(), 36, "a UUID: {}", eng.id);
    assert!(eng.created_at > 0);
    assert!(eng.members.is_empty());
    match store.create_group("a", "eng", "") {
        Err(Error::Conflict(m)) => assert!(m.contains("eng"), "{m}"),
        other => panic!("a taken name: expected Conflict, got {other:?}"),
    }
    match store.create_group("nowhere", "eng", "") {
        Err(Error::NotFound(_)) => {}
        other => panic!("a missing space: expected NotFound, got {other:?}"),
    }
    // The same name in another space is another group.
    let other = store.create_group("b", "eng", "").expect("create_group b");
    assert_ne!(other.id, eng.id);
    store.create_group("a", "HR", "").expect("create_group");
    store.create_group("a", "design", "").expect("create_group");
    assert_eq!(
        names(store, "a"),
        [
            ("HR".to_owned(), vec![]),
            ("design".to_owned(), vec![]),
            ("eng".to_owned(), vec![])
        ],
        "by name, in byte order"
    );
    assert!(store.groups("nowhere").expect("groups").is_empty());

    let by_name = store.group("a", "eng").expect("group").expect("by name");
    assert_eq!(by_name, eng);
    let by_id = store.group("a", &eng.id).expect("group").expect("by UUID");
    assert_eq!(by_id, eng);
    assert!(
        store.group("b", &eng.id).expect("group").is_none(),
        "another space's group"
    );
    assert!(store.group("a", "nope").expect("group").is_none());
    assert!(store.group("nowhere", "eng").expect("group").is_none());
}

/// Adding a member twice leaves one membership (the second add says so); members are listed
/// by name, a user's groups in one space by name; removing tells whether there was anything
/// to remove. A missing group is `NotFound` for an add and nothing for a removal.
pub fn groups_members_are_added_once_and_listed_by_name(store: &dyn Store) {
    space(store, "a");
    space(store, "b");
    let zed = member(store, "zed", &["a", "b"]);
    let amy = member(store, "amy", &["a"]);
    store.create_group("a", "eng", "").expect("create_group");
    store.create_group("a", "ops", "").expect("create_group");
    store.create_group("b", "eng", "").expect("create_group");

    assert!(store.add_group_member("a", "eng", zed).expect("add"));
    assert!(store.add_group_member("a", "eng", amy).expect("add"));
    assert!(
        !store.add_group_member("a", "eng", zed).expect("add again"),
        "already a member"
    );
    assert!(store.add_group_member("a", "ops", zed).expect("add"));
    assert!(store.add_group_member("b", "eng", zed).expect("add"));
    assert_eq!(members(store, "a", "eng"), ["amy", "zed"]);
    assert_eq!(
        names(store, "a"),
        [
            ("eng".to_owned(), owned(&["amy", "zed"])),
            ("ops".to_owned(), owned(&["zed"]))
        ]
    );
    assert_eq!(
        store.user_groups("a", zed).expect("user_groups"),
        ["eng", "ops"]
    );
    assert_eq!(store.user_groups("b", zed).expect("user_groups"), ["eng"]);
    assert_eq!(store.user_groups("b", amy).expect("user_groups"), [""; 0]);
    assert_eq!(store.user_groups("a", -1).expect("user_groups"), [""; 0]);

    match store.add_group_member("a", "nope", zed) {
        Err(Error::NotFound(_)) => {}
        other => panic!("a missing group: expected NotFound, got {other:?}"),
    }
    match store.add_group_member("nowhere", "eng", zed) {
        Err(Error::NotFound(_)) => {}
        other => panic!("a missing space: expected NotFound, got {other:?}"),
    }
    assert!(
        store
            .add_group_member("a", "eng", zed + amy + 1000)
            .is_err(),
        "a user that does not exist"
    );

    assert!(store.remove_group_member("a", "eng", zed).expect("remove"));
    assert!(
        !store.remove_group_member("a", "eng", zed).expect("remove"),
        "once"
    );
    assert!(!store.remove_group_member("a", "nope", zed).expect("remove"));
    assert_eq!(members(store, "a", "eng"), ["amy"]);
    assert_eq!(store.user_groups("a", zed).expect("user_groups"), ["ops"]);
    assert_eq!(
        members(store, "b", "eng"),
        ["zed"],
        "another space's group of the same name keeps its members"
    );
}

/// Deleting a group takes its memberships and nothing else; the name is free again, and the
/// new group starts empty.
pub fn groups_deleting_a_group_takes_its_memberships(store: &dyn Store) {
    space(store, "a");
    space(store, "b");
    let ann = member(store, "ann", &["a", "b"]);
    for s in ["a", "b"] {
        store.create_group(s, "eng", "").expect("create_group");
        store.add_group_member(s, "eng", ann).expect("add");
    }
    store.create_group("a", "ops", "").expect("create_group");
    store.add_group_member("a", "ops", ann).expect("add");

    assert!(store.delete_group("a", "eng").expect("delete_group"));
    assert!(
        !store.delete_group("a", "eng").expect("delete_group"),
        "once"
    );
    assert!(!store.delete_group("nowhere", "eng").expect("delete_group"));
    assert!(store.group("a", "eng").expect("group").is_none());
    assert_eq!(store.user_groups("a", ann).expect("user_groups"), ["ops"]);
    assert_eq!(store.user_groups("b", ann).expect("user_groups"), ["eng"]);

    let again = store
        .create_group("a", "eng", "")
        .expect("the name is free");
    assert!(again.members.is_empty());
    assert_eq!(members(store, "a", "eng"), [""; 0]);
}

/// A deleted user leaves every group; a user who leaves a space leaves that space's groups
/// (and only those); a deleted space takes its groups, and a space made again under its
/// name has none.
pub fn groups_go_with_their_user_their_space_and_a_left_membership(store: &dyn Store) {
    space(store, "a");
    space(store, "b");
    let gone = member(store, "gone", &["a", "b"]);
    let stays = member(store, "stays", &["a", "b"]);
    for s in ["a", "b"] {
        store.create_group(s, "eng", "").expect("create_group");
        for u in [gone, stays] {
            store.add_group_member(s, "eng", u).expect("add");
        }
    }
    store.delete_user(gone).expect("delete_user");
    assert_eq!(members(store, "a", "eng"), ["stays"]);
    assert_eq!(members(store, "b", "eng"), ["stays"]);
    assert_eq!(store.user_groups("a", gone).expect("user_groups"), [""; 0]);

    assert!(store.revoke_membership(stays, "a").expect("revoke"));
    assert_eq!(
        members(store, "a", "eng"),
        [""; 0],
        "left the space, left its groups"
    );
    assert_eq!(members(store, "b", "eng"), ["stays"]);
    // Joining again does not bring the groups back.
    store.grant(stays, "a", Role::Editor).expect("grant");
    assert_eq!(store.user_groups("a", stays).expect("user_groups"), [""; 0]);
    store.add_group_member("a", "eng", stays).expect("add");

    store
        .delete_space("a")
        .expect("a space with groups is deleted");
    assert!(store.space("a").expect("space").is_none());
    assert!(store.groups("a").expect("groups").is_empty());
    assert_eq!(store.user_groups("a", stays).expect("user_groups"), [""; 0]);
    assert_eq!(members(store, "b", "eng"), ["stays"]);
    space(store, "a");
    assert!(store.groups("a").expect("groups").is_empty());
    store
        .create_group("a", "eng", "")
        .expect("the name is free in the new space");
}

/// Several nodes creating one group, or adding one member, at once: one creation succeeds
/// and every other gets `Conflict`; one add reports a new member, and one membership exists.
pub fn groups_racing_creations_and_additions_have_one_result(store: &dyn Store) {
    const RACERS: usize = 6;
    space(store, "a");
    let ann = member(store, "ann", &["a"]);
    let outcomes: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..RACERS)
            .map(|_| {
                s.spawn(|| match store.create_group("a", "contested", "") {
                    Ok(_) => true,
                    Err(Error::Conflict(_)) => false,
                    Err(e) => panic!("create_group: expected Ok or Conflict, got {e:?}"),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a racer panicked"))
            .collect()
    });
    assert_eq!(
        outcomes.iter().filter(|w| **w).count(),
        1,
        "one winner: {outcomes:?}"
    );
    let added: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..RACERS)
            .map(|_| s.spawn(|| store.add_group_member("a", "contested", ann).expect("add")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a racer panicked"))
            .collect()
    });
    assert_eq!(
        added.iter().filter(|a| **a).count(),
        1,
        "one add is new: {added:?}"
    );
    assert_eq!(store.groups("a").expect("groups").len(), 1);
    assert_eq!(members(store, "a", "contested"), ["ann"]);
}
