//! Conformance cases for conversations and messages (`ChatStore`). Each case is a `pub fn chat_…(store: &dyn Store)`
//! listed in the macro below.

use quarry_core::Error;

use crate::{ChatMessageRow, ConversationRow, ConversationSummary, Store};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_chat {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::chat];
            chat_conversations_and_messages_round_trip,
            chat_conversations_are_listed_by_last_activity_with_counts,
            chat_seq_counts_up_per_conversation_and_updates_keep_it,
            chat_deleting_a_conversation_takes_its_messages,
            chat_another_owner_sees_and_changes_nothing,
            chat_duplicate_ids_conflict_and_change_nothing,
            chat_a_turn_is_stored_whole_or_not_at_all,
            chat_concurrent_appends_never_share_a_seq,
            chat_concurrent_turns_keep_their_messages_together,
        );
    };
}

#[doc(hidden)]
pub use __conformance_chat;

/// A conversation of `owner` created and updated at `at` (also for a backend's own tests).
pub fn conversation(owner: &str, id: &str, at: i64) -> ConversationRow {
    ConversationRow {
        id: id.into(),
        owner: owner.into(),
        title: format!("about {id}"),
        kb_ids: r#"["kb1"]"#.into(),
        model: None,
        created_at: at,
        updated_at: at,
    }
}

/// A complete message with no sources or tool calls (also for a backend's own tests).
pub fn message(conversation_id: &str, id: &str, role: &str, at: i64) -> ChatMessageRow {
    ChatMessageRow {
        id: id.into(),
        conversation_id: conversation_id.into(),
        seq: 0,
        role: role.into(),
        content: format!("text of {id}"),
        sources: "[]".into(),
        tool_calls: "[]".into(),
        status: "complete".into(),
        usage: None,
        created_at: at,
    }
}

fn insert(store: &dyn Store, c: &ConversationRow) {
    store
        .insert_conversation(c)
        .unwrap_or_else(|e| panic!("insert_conversation {}: {e}", c.id));
}

fn append(store: &dyn Store, owner: &str, m: &ChatMessageRow) -> i64 {
    store
        .append_message(owner, m)
        .unwrap_or_else(|e| panic!("append_message {}: {e}", m.id))
}

fn messages(store: &dyn Store, owner: &str, conversation: &str) -> Vec<ChatMessageRow> {
    store.messages(owner, conversation).expect("messages")
}

fn seqs(store: &dyn Store, owner: &str, conversation: &str) -> Vec<(String, i64)> {
    messages(store, owner, conversation)
        .into_iter()
        .map(|m| (m.id, m.seq))
        .collect()
}

fn stored(store: &dyn Store, owner: &str, id: &str) -> ConversationRow {
    store
        .conversation(owner, id)
        .expect("conversation")
        .unwrap_or_else(|| panic!("conversation {id} of {owner} not found"))
}

/// A conversation and its messages come back as stored; a rename keeps `updated_at`, which
/// follows the messages.
pub fn chat_conversations_and_messages_round_trip(store: &dyn Store) {
    let mut c = conversation("alice", "c1", 10);
    c.model = Some("llama".into());
    insert(store, &c);
    assert_eq!(stored(store, "alice", "c1"), c);
    assert_eq!(
        store.conversation("alice", "c2").expect("conversation"),
        None
    );

    let mut m = message("c1", "m1", "user", 20);
    m.usage = Some(r#"{"prompt":3}"#.into());
    m.sources = r##"[{"doc":"#abc","text":"naïve — ünïcödé ✓"}]"##.into();
    m.content = "line one\nline two\t'quoted' \"double\" \\ 100%".into();
    assert_eq!(append(store, "alice", &m), 1);
    assert_eq!(
        messages(store, "alice", "c1"),
        vec![ChatMessageRow { seq: 1, ..m }]
    );

    let changed = ConversationRow {
        title: "renamed".into(),
        kb_ids: "[]".into(),
        model: None,
        ..c.clone()
    };
    assert!(
        store
            .update_conversation(&changed)
            .expect("update_conversation")
    );
    let got = stored(store, "alice", "c1");
    assert_eq!(
        got,
        ConversationRow {
            updated_at: 20,
            ..changed.clone()
        },
        "the append moved updated_at, the rename did not"
    );
    assert_eq!(got.created_at, 10);
    let missing = ConversationRow {
        id: "nope".into(),
        ..changed
    };
    assert!(
        !store
            .update_conversation(&missing)
            .expect("update_conversation")
    );
    assert!(messages(store, "alice", "nope").is_empty());
}

/// Conversations are listed most recently active first (ties: newest created, then id), at
/// most `limit`, each with its message count.
pub fn chat_conversations_are_listed_by_last_activity_with_counts(store: &dyn Store) {
    for (id, at) in [("old", 1), ("mid", 2), ("new", 3)] {
        insert(store, &conversation("alice", id, at));
    }
    insert(store, &conversation("bob", "bobs", 50));
    let ids = |list: Vec<ConversationSummary>| -> Vec<String> {
        list.into_iter().map(|c| c.conversation.id).collect()
    };
    let list = |limit: usize| store.conversations("alice", limit).expect("conversations");
    assert_eq!(ids(list(10)), ["new", "mid", "old"]);
    // A message brings the oldest to the top.
    append(store, "alice", &message("old", "m1", "user", 100));
    append(store, "alice", &message("old", "m2", "assistant", 101));
    let all = list(10);
    assert_eq!(all[0].conversation.id, "old");
    assert_eq!(all[0].conversation.updated_at, 101);
    assert_eq!(all[0].message_count, 2);
    assert_eq!(all[1].message_count, 0);
    assert_eq!(ids(list(2)), ["old", "new"]);
    assert!(list(0).is_empty());
    assert_eq!(list(usize::MAX).len(), 3);
    // Equal activity: the newer conversation first, then by id (byte order).
    for (id, created) in [("tie-b", 5), ("tie-a", 5), ("tie-C", 5), ("tie-z", 4)] {
        let c = ConversationRow {
            updated_at: 500,
            ..conversation("carol", id, created)
        };
        insert(store, &c);
    }
    assert_eq!(
        ids(store.conversations("carol", 10).expect("conversations")),
        ["tie-C", "tie-a", "tie-b", "tie-z"]
    );
    assert!(
        store
            .conversations("nobody", 10)
            .expect("conversations")
            .is_empty()
    );
}

/// `seq` counts from 1 per conversation whatever the caller passes; an update rewrites
/// content, sources, tool calls, status and usage, never seq or role.
pub fn chat_seq_counts_up_per_conversation_and_updates_keep_it(store: &dyn Store) {
    insert(store, &conversation("alice", "a", 1));
    insert(store, &conversation("alice", "b", 1));
    let mut given = message("a", "m1", "user", 2);
    given.seq = 99; // ignored
    assert_eq!(append(store, "alice", &given), 1);
    assert_eq!(
        append(store, "alice", &message("a", "m2", "assistant", 3)),
        2
    );
    assert_eq!(append(store, "alice", &message("b", "m3", "user", 4)), 1);
    assert_eq!(append(store, "alice", &message("a", "m4", "user", 5)), 3);
    assert_eq!(
        seqs(store, "alice", "a"),
        [("m1".into(), 1), ("m2".into(), 2), ("m4".into(), 3)]
    );

    // The answer is written as interrupted first, then finished in place.
    let mut answer = message("a", "m5", "assistant", 6);
    answer.status = "interrupted".into();
    answer.content = String::new();
    let seq = append(store, "alice", &answer);
    assert_eq!(seq, 4);
    let finished = ChatMessageRow {
        content: "done".into(),
        sources: r#"[{"n":1}]"#.into(),
        tool_calls: r#"[{"tool":"x"}]"#.into(),
        status: "complete".into(),
        usage: Some("{}".into()),
        seq: 0,
        role: "ignored".into(),
        created_at: 999,
        ..answer.clone()
    };
    assert!(
        store
            .update_message("alice", &finished)
            .expect("update_message")
    );
    let last = messages(store, "alice", "a").pop().expect("a message");
    assert_eq!(
        last,
        ChatMessageRow {
            seq,
            role: "assistant".into(),
            created_at: 6,
            ..finished.clone()
        },
        "seq, role and created_at stay"
    );
    assert_eq!(
        stored(store, "alice", "a").updated_at,
        6,
        "an update is no activity"
    );
    // Usage can be cleared again.
    let cleared = ChatMessageRow {
        usage: None,
        ..finished.clone()
    };
    assert!(
        store
            .update_message("alice", &cleared)
            .expect("update_message")
    );
    assert_eq!(
        messages(store, "alice", "a")
            .pop()
            .expect("a message")
            .usage,
        None
    );
    // A message is addressed within its conversation.
    let elsewhere = ChatMessageRow {
        conversation_id: "b".into(),
        ..finished.clone()
    };
    assert!(
        !store
            .update_message("alice", &elsewhere)
            .expect("update_message")
    );
    let unknown = ChatMessageRow {
        id: "nope".into(),
        ..finished
    };
    assert!(
        !store
            .update_message("alice", &unknown)
            .expect("update_message")
    );
    assert_eq!(seqs(store, "alice", "b"), [("m3".into(), 1)]);
}

/// Deleting a conversation takes its messages (their ids are free again) and no others.
pub fn chat_deleting_a_conversation_takes_its_messages(store: &dyn Store) {
    insert(store, &conversation("alice", "a", 1));
    insert(store, &conversation("alice", "b", 1));
    append(store, "alice", &message("a", "m1", "user", 2));
    append(store, "alice", &message("a", "m2", "assistant", 3));
    append(store, "alice", &message("b", "m3", "user", 2));
    assert!(
        store
            .delete_conversation("alice", "a")
            .expect("delete_conversation")
    );
    assert!(
        !store
            .delete_conversation("alice", "a")
            .expect("delete_conversation"),
        "once"
    );
    assert!(
        !store
            .delete_conversation("alice", "never")
            .expect("delete_conversation")
    );
    assert_eq!(
        store.conversation("alice", "a").expect("conversation"),
        None
    );
    assert!(messages(store, "alice", "a").is_empty());
    assert_eq!(seqs(store, "alice", "b"), [("m3".into(), 1)]);
    let listed = store.conversations("alice", 10).expect("conversations");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].message_count, 1);
    // The ids are free again, and seq starts over.
    insert(store, &conversation("alice", "a", 3));
    assert_eq!(append(store, "alice", &message("a", "m1", "user", 4)), 1);
    assert_eq!(append(store, "alice", &message("a", "m2", "user", 5)), 2);
}

/// Another owner can neither read, count, change, append to nor delete a conversation, and
/// is told exactly what it would be told about one that does not exist.
pub fn chat_another_owner_sees_and_changes_nothing(store: &dyn Store) {
    let c = conversation("alice", "c1", 1);
    insert(store, &c);
    let m = message("c1", "m1", "user", 2);
    append(store, "alice", &m);

    assert_eq!(store.conversation("bob", "c1").expect("conversation"), None);
    assert!(
        store
            .conversations("bob", 10)
            .expect("conversations")
            .is_empty()
    );
    assert!(messages(store, "bob", "c1").is_empty());
    let hijack = ConversationRow {
        owner: "bob".into(),
        title: "mine now".into(),
        ..c.clone()
    };
    assert!(
        !store
            .update_conversation(&hijack)
            .expect("update_conversation")
    );
    let edit = ChatMessageRow {
        content: "forged".into(),
        ..m.clone()
    };
    assert!(!store.update_message("bob", &edit).expect("update_message"));
    assert!(
        !store
            .delete_conversation("bob", "c1")
            .expect("delete_conversation")
    );
    // Appending to someone else's conversation reads like appending to none at all.
    let theirs = store
        .append_message("bob", &message("c1", "m2", "user", 3))
        .expect_err("appending to another owner's conversation");
    let nobodys = store
        .append_message("bob", &message("nope", "m3", "user", 3))
        .expect_err("appending to no conversation");
    assert!(matches!(theirs, Error::NotFound(_)), "{theirs:?}");
    assert!(matches!(nobodys, Error::NotFound(_)), "{nobodys:?}");
    assert_eq!(theirs.to_string(), "conversation 'c1' not found");
    assert_eq!(nobodys.to_string(), "conversation 'nope' not found");
    // A turn for it, as bob, is refused the same way.
    let turn = store
        .store_turn(&hijack, false, &[message("c1", "m4", "user", 4)])
        .expect_err("a turn in another owner's conversation");
    assert!(
        matches!(&turn, Error::NotFound(m) if m == "conversation 'c1' not found"),
        "{turn:?}"
    );

    // Alice's rows are untouched.
    assert_eq!(
        stored(store, "alice", "c1"),
        ConversationRow { updated_at: 2, ..c }
    );
    assert_eq!(
        messages(store, "alice", "c1"),
        vec![ChatMessageRow { seq: 1, ..m }]
    );
    assert_eq!(
        store.conversations("alice", 10).expect("conversations")[0].message_count,
        1
    );
    // The refused message ids were never stored.
    insert(store, &conversation("bob", "b1", 5));
    assert_eq!(append(store, "bob", &message("b1", "m2", "user", 6)), 1);
}

/// A taken conversation id (whoever owns it) or message id is `Conflict`, and the refused
/// append changes nothing, `updated_at` included.
pub fn chat_duplicate_ids_conflict_and_change_nothing(store: &dyn Store) {
    insert(store, &conversation("alice", "c1", 1));
    match store.insert_conversation(&conversation("bob", "c1", 1)) {
        Err(Error::Conflict(m)) => assert_eq!(m, "conversation 'c1' already exists"),
        other => panic!("expected Conflict for a taken conversation id, got {other:?}"),
    }
    assert_eq!(store.conversation("bob", "c1").expect("conversation"), None);
    append(store, "alice", &message("c1", "m1", "user", 2));
    match store.append_message("alice", &message("c1", "m1", "user", 3)) {
        Err(Error::Conflict(m)) => assert_eq!(m, "message 'm1' already exists"),
        other => panic!("expected Conflict for a taken message id, got {other:?}"),
    }
    // A message id is unique across conversations, too.
    insert(store, &conversation("alice", "c2", 1));
    assert!(
        matches!(
            store.append_message("alice", &message("c2", "m1", "user", 9)),
            Err(Error::Conflict(_))
        ),
        "a message id taken in another conversation"
    );
    assert_eq!(messages(store, "alice", "c1").len(), 1);
    assert!(messages(store, "alice", "c2").is_empty());
    assert_eq!(stored(store, "alice", "c1").updated_at, 2);
    assert_eq!(stored(store, "alice", "c2").updated_at, 1);
    // The next append takes the next seq: the refused one used none.
    assert_eq!(append(store, "alice", &message("c1", "m2", "user", 4)), 2);
}

/// A turn (the conversation inserted or updated, then its messages) is stored in one
/// transaction: all of it or none of it.
pub fn chat_a_turn_is_stored_whole_or_not_at_all(store: &dyn Store) {
    let c = conversation("alice", "c1", 10);
    let turn = [
        message("c1", "u1", "user", 11),
        message("c1", "a1", "assistant", 12),
    ];
    store.store_turn(&c, true, &turn).expect("store_turn");
    assert_eq!(
        seqs(store, "alice", "c1"),
        [("u1".into(), 1), ("a1".into(), 2)]
    );
    assert_eq!(stored(store, "alice", "c1").updated_at, 12);
    // A later turn updates the conversation and appends after the stored messages.
    let later = ConversationRow {
        kb_ids: r#"["kb2"]"#.into(),
        title: "later".into(),
        model: Some("m".into()),
        ..c.clone()
    };
    store
        .store_turn(&later, false, &[message("c1", "u2", "user", 20)])
        .expect("store_turn");
    let got = stored(store, "alice", "c1");
    assert_eq!(
        got,
        ConversationRow {
            updated_at: 20,
            ..later.clone()
        }
    );
    assert_eq!(seqs(store, "alice", "c1").last(), Some(&("u2".into(), 3)));
    // A turn with no messages only updates the conversation.
    let renamed = ConversationRow {
        title: "renamed".into(),
        ..later.clone()
    };
    store.store_turn(&renamed, false, &[]).expect("store_turn");
    assert_eq!(stored(store, "alice", "c1").title, "renamed");
    assert_eq!(stored(store, "alice", "c1").updated_at, 20);

    // A duplicate message id rolls the whole turn back, conversation included.
    let c2 = conversation("alice", "c2", 30);
    let bad = [
        message("c2", "u3", "user", 31),
        message("c2", "u1", "user", 32),
    ];
    assert!(
        matches!(store.store_turn(&c2, true, &bad), Err(Error::Conflict(_))),
        "a taken message id"
    );
    assert_eq!(
        store.conversation("alice", "c2").expect("conversation"),
        None
    );
    // … and in a later turn, the update and the earlier messages too.
    let bad_later = [
        message("c1", "u4", "user", 40),
        message("c1", "a1", "assistant", 41),
    ];
    let retitled = ConversationRow {
        title: "lost".into(),
        ..renamed.clone()
    };
    assert!(matches!(
        store.store_turn(&retitled, false, &bad_later),
        Err(Error::Conflict(_))
    ));
    let got = stored(store, "alice", "c1");
    assert_eq!((got.title.as_str(), got.updated_at), ("renamed", 20));
    assert_eq!(messages(store, "alice", "c1").len(), 3);
    // A new turn whose id is taken is Conflict, and appends nothing.
    match store.store_turn(&c, true, &[message("c1", "u5", "user", 50)]) {
        Err(Error::Conflict(m)) => assert_eq!(m, "conversation 'c1' already exists"),
        other => panic!("expected Conflict for a taken conversation id, got {other:?}"),
    }
    // An update of an unknown conversation is NotFound, and stores nothing.
    let unknown = conversation("alice", "c3", 60);
    let e = store
        .store_turn(&unknown, false, &[message("c3", "u6", "user", 61)])
        .expect_err("a turn in an unknown conversation");
    assert!(
        matches!(&e, Error::NotFound(m) if m == "conversation 'c3' not found"),
        "{e:?}"
    );
    assert_eq!(
        store.conversation("alice", "c3").expect("conversation"),
        None
    );
    assert_eq!(messages(store, "alice", "c1").len(), 3);
    // The ids refused with their turns are free.
    store
        .store_turn(&c2, true, &[message("c2", "u3", "user", 70)])
        .expect("store_turn");
    assert_eq!(seqs(store, "alice", "c2"), [("u3".into(), 1)]);
}

/// Appends racing on one conversation (two tabs, two nodes) all land, each with its own
/// seq, numbered 1..n without gaps; appends to another conversation are numbered apart.
pub fn chat_concurrent_appends_never_share_a_seq(store: &dyn Store) {
    const WRITERS: usize = 4;
    const EACH: usize = 12;
    insert(store, &conversation("alice", "busy", 1));
    insert(store, &conversation("alice", "side", 1));
    let returned: Vec<Vec<(String, i64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    (0..EACH)
                        .map(|i| {
                            let conv = if w == 0 && i % 3 == 0 { "side" } else { "busy" };
                            let id = format!("w{w}-{i}");
                            let at = i64::try_from(10 + i).unwrap_or(i64::MAX);
                            let seq = store
                                .append_message("alice", &message(conv, &id, "user", at))
                                .unwrap_or_else(|e| panic!("concurrent append {id}: {e}"));
                            (id, seq)
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a writer panicked"))
            .collect()
    });
    for (name, expected) in [("busy", WRITERS * EACH - EACH / 3), ("side", EACH / 3)] {
        let stored = seqs(store, "alice", name);
        let numbers: Vec<i64> = stored.iter().map(|(_, s)| *s).collect();
        let want: Vec<i64> = (1..=i64::try_from(expected).unwrap_or(i64::MAX)).collect();
        assert_eq!(numbers, want, "{name}: seqs 1..n, each once, in order");
        // What each append returned is what was stored.
        for (id, seq) in returned.iter().flatten() {
            if let Some((_, s)) = stored.iter().find(|(i, _)| i == id) {
                assert_eq!(s, seq, "{id}: returned {seq}, stored {s}");
            }
        }
    }
    // Each writer's own appends to one conversation are numbered in its order.
    let busy_ids: Vec<String> = seqs(store, "alice", "busy")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    for (w, mine) in returned.iter().enumerate() {
        let busy: Vec<i64> = mine
            .iter()
            .filter(|(id, _)| busy_ids.contains(id))
            .map(|(_, s)| *s)
            .collect();
        assert!(busy.windows(2).all(|p| p[0] < p[1]), "writer {w}: {busy:?}");
    }
    let listed = store.conversations("alice", 10).expect("conversations");
    let count = |id: &str| {
        listed
            .iter()
            .find(|c| c.conversation.id == id)
            .map(|c| c.message_count)
    };
    assert_eq!(count("busy"), i64::try_from(WRITERS * EACH - EACH / 3).ok());
    assert_eq!(count("side"), i64::try_from(EACH / 3).ok());
}

/// Turns racing on one conversation each keep their messages together: a turn's messages
/// get consecutive seqs, in the turn's order.
pub fn chat_concurrent_turns_keep_their_messages_together(store: &dyn Store) {
    const WRITERS: usize = 3;
    const TURNS: usize = 6;
    let c = conversation("alice", "c", 1);
    insert(store, &c);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let c = c.clone();
            s.spawn(move || {
                for t in 0..TURNS {
                    let turn = [
                        message("c", &format!("q{w}-{t}"), "user", 10),
                        message("c", &format!("a{w}-{t}"), "assistant", 11),
                    ];
                    store
                        .store_turn(&c, false, &turn)
                        .unwrap_or_else(|e| panic!("turn {w}-{t}: {e}"));
                }
            });
        }
    });
    let stored = seqs(store, "alice", "c");
    assert_eq!(stored.len(), WRITERS * TURNS * 2);
    for (i, pair) in stored.chunks(2).enumerate() {
        let (q, a) = (&pair[0], &pair[1]);
        assert_eq!(
            (q.1, a.1),
            (
                i64::try_from(2 * i + 1).unwrap_or(i64::MAX),
                i64::try_from(2 * i + 2).unwrap_or(i64::MAX)
            ),
            "seqs without gaps"
        );
        assert!(
            q.0.starts_with('q') && a.0 == format!("a{}", &q.0[1..]),
            "a turn split apart: {q:?} then {a:?}"
        );
    }
}
