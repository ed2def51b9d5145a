//! The insight log: searches grouped by wording with their days, usage counts added up per
//! day across batches, both bounded to a space and a window, pruned by age.

use crate::{DAY_MS, InsightWindow, SearchRecord, Store, UsageCount};

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_insight {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::insight];
            insight_unanswered_groups_count_by_wording_within_space_and_window,
            insight_usage_counts_add_up_across_batches,
            insight_prune_removes_only_older_rows,
        );
    };
}

#[doc(hidden)]
pub use __conformance_insight;

/// Day 20,000 (2024-10-04) at noon, plus `day` days.
fn at(day: i64) -> i64 {
    (20_000 + day) * DAY_MS + DAY_MS / 2
}

fn search(day: i64, space: &str, kb: &str, wording: &str, found: u32) -> SearchRecord {
    SearchRecord {
        at: at(day),
        space_id: space.into(),
        knowledge_base: kb.into(),
        user_id: "u1".into(),
        token_id: String::new(),
        surface: "rest".into(),
        results: found,
        top_score: (found > 0).then_some(0.9).or(Some(0.1 * day as f64)),
        unanswered: found == 0,
        wording: wording.into(),
        query: (found == 0).then(|| format!("{wording} asked on day {day}")),
    }
}

fn window(space: &str, kb: Option<&str>, from: i64, to: i64) -> InsightWindow {
    InsightWindow {
        space_id: space.into(),
        knowledge_base: kb.map(|k| vec!["other-name".to_owned(), k.to_owned()]),
        since: at(from) - DAY_MS / 2,
        until: at(to) - DAY_MS / 2,
    }
}

fn usage(day: i64, metric: &str, user: &str, count: u64, total: u64) -> UsageCount {
    UsageCount {
        space_id: "s1".into(),
        day: 20_000 + day,
        metric: metric.into(),
        subject: "pkg.tool".into(),
        user_id: user.into(),
        token_id: String::new(),
        count,
        total,
    }
}

/// The most searched wording comes first with its days oldest first, its latest kept text
/// and its best score; answered searches, other spaces, other knowledge bases (when one is
/// asked for) and searches outside the window do not count.
pub fn insight_unanswered_groups_count_by_wording_within_space_and_window(store: &dyn Store) {
    store.append_insight(&[], &[]).expect("an empty batch");
    let mut rows = vec![
        search(0, "s1", "kb1", "reset password", 0),
        search(0, "s1", "kb1", "reset password", 0),
        search(2, "s1", "", "reset password", 0),
        search(1, "s1", "kb1", "vpn", 0),
        search(1, "s1", "kb1", "vpn", 3),
        search(1, "s1", "kb1", "vpn", 2),
        search(1, "s2", "kb9", "vpn", 0),
        search(1, "s2", "kb9", "vpn", 0),
        search(1, "s2", "kb9", "vpn", 0),
        search(9, "s1", "kb1", "vpn", 0),
    ];
    // Kept text is optional: a group may have none.
    let mut hidden = search(1, "s1", "kb2", "h:0123", 0);
    hidden.query = None;
    rows.push(hidden);
    store.append_insight(&rows, &[]).expect("append_insight");

    let groups = store
        .unanswered_groups(&window("s1", None, 0, 5), 10)
        .expect("unanswered_groups");
    let summary: Vec<(&str, u64)> = groups
        .iter()
        .map(|g| (g.wording.as_str(), g.count))
        .collect();
    assert_eq!(
        summary,
        [("reset password", 3), ("h:0123", 1), ("vpn", 1)],
        "{groups:?}"
    );
    let reset = &groups[0];
    assert_eq!(reset.days, [(20_000, 2), (20_002, 1)]);
    assert_eq!((reset.first_at, reset.last_at), (at(0), at(2)));
    assert_eq!(
        reset.query.as_deref(),
        Some("reset password asked on day 2")
    );
    assert!(
        (reset.best_score.unwrap_or_default() - 0.2).abs() < 1e-9,
        "{reset:?}"
    );
    assert_eq!(groups[1].query, None);

    let kb1 = store
        .unanswered_groups(&window("s1", Some("kb1"), 0, 10), 10)
        .expect("unanswered_groups");
    let summary: Vec<(&str, u64)> = kb1.iter().map(|g| (g.wording.as_str(), g.count)).collect();
    // A tie: the group searched last comes first; text is the knowledge base's own.
    assert_eq!(summary, [("vpn", 2), ("reset password", 2)], "{kb1:?}");
    assert_eq!(kb1[0].days, [(20_001, 1), (20_009, 1)]);
    assert_eq!(
        kb1[1].query.as_deref(),
        Some("reset password asked on day 0")
    );

    let limited = store
        .unanswered_groups(&window("s1", None, 0, 10), 1)
        .expect("unanswered_groups");
    assert_eq!(limited.len(), 1);
    assert!(
        store
            .unanswered_groups(&window("s3", None, 0, 10), 10)
            .expect("unanswered_groups")
            .is_empty()
    );
}

/// Counts add up per day, metric and subject, and per day, metric, person and token, with
/// every batch (and within one); the window is whole days; other spaces are apart.
pub fn insight_usage_counts_add_up_across_batches(store: &dyn Store) {
    let mut other_tool = usage(0, "tool_calls", "u1", 1, 2);
    other_tool.subject = "pkg.other".into();
    store
        .append_insight(
            &[],
            &[
                usage(0, "tool_calls", "u1", 1, 10),
                usage(0, "tool_calls", "u1", 2, 5),
                usage(0, "tool_calls", "u2", 1, 0),
                other_tool,
                usage(3, "searches", "u1", 4, 0),
            ],
        )
        .expect("append_insight");
    let mut other = usage(0, "tool_calls", "u1", 7, 0);
    other.space_id = "s2".into();
    store
        .append_insight(&[], &[usage(0, "tool_calls", "u1", 1, 1), other])
        .expect("append_insight");

    let first_day = window("s1", None, 0, 1);
    let rows = store
        .usage_by_subject(&first_day)
        .expect("usage_by_subject");
    let summary: Vec<(i64, &str, &str, u64, u64)> = rows
        .iter()
        .map(|u| {
            (
                u.day,
                u.metric.as_str(),
                u.subject.as_str(),
                u.count,
                u.total,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (20_000, "tool_calls", "pkg.other", 1, 2),
            (20_000, "tool_calls", "pkg.tool", 5, 16)
        ],
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .all(|u| u.user_id.is_empty() && u.token_id.is_empty())
    );

    let people = store
        .usage_by_person(&first_day, true)
        .expect("usage_by_person");
    let summary: Vec<(&str, u64, u64)> = people
        .iter()
        .map(|u| (u.user_id.as_str(), u.count, u.total))
        .collect();
    assert_eq!(summary, [("u1", 5, 18), ("u2", 1, 0)], "{people:?}");
    assert!(people.iter().all(|u| u.subject.is_empty()));

    let all = window("s1", None, 0, 4);
    assert_eq!(
        store
            .usage_by_subject(&all)
            .expect("usage_by_subject")
            .len(),
        3
    );
    let per_day = store.usage_by_person(&all, true).expect("usage_by_person");
    assert_eq!(per_day.len(), 3);
    assert_eq!(per_day[2].day, 20_003);
    let totals = store.usage_by_person(&all, false).expect("usage_by_person");
    let summary: Vec<(i64, &str, &str, u64)> = totals
        .iter()
        .map(|u| (u.day, u.user_id.as_str(), u.metric.as_str(), u.count))
        .collect();
    assert_eq!(
        summary,
        [
            (20_000, "u1", "searches", 4),
            (20_000, "u1", "tool_calls", 5),
            (20_000, "u2", "tool_calls", 1)
        ],
        "{totals:?}"
    );
}

/// Searches and day counts before the cut go; the rest stay.
pub fn insight_prune_removes_only_older_rows(store: &dyn Store) {
    store
        .append_insight(
            &[search(0, "s1", "", "old", 0), search(5, "s1", "", "new", 0)],
            &[
                usage(0, "searches", "u1", 1, 0),
                usage(5, "searches", "u1", 1, 0),
            ],
        )
        .expect("append_insight");
    let removed = store.prune_insight(at(3)).expect("prune_insight");
    assert_eq!(removed, 1);
    let groups = store
        .unanswered_groups(&window("s1", None, 0, 10), 10)
        .expect("unanswered_groups");
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].wording, "new");
    let w = window("s1", None, 0, 10);
    for counts in [
        store.usage_by_subject(&w).expect("usage_by_subject"),
        store.usage_by_person(&w, true).expect("usage_by_person"),
    ] {
        assert_eq!(counts.len(), 1);
        assert_eq!(counts[0].day, 20_005);
    }
}
