//! Insight for a space's admins (issue 69) over REST, from the insight log `quarry-audit`
//! writes: `GET /api/v1/insight/unanswered` (what was asked and found nothing, grouped by
//! wording, with counts per day) and `GET /api/v1/insight/usage` (daily counts by metric,
//! person and token; `?format=csv` exports them), and `GET`/`PUT /api/v1/insight/budget`
//! (the space's monthly model tokens: spent, and the limit its owner sets). The views read
//! aggregates only, never the documents: a group's near-miss passage is found by the
//! viewer's own search, so nobody sees text they may not read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use quarry_audit::usage::METRICS;
use quarry_core::{Access, Error, now_millis};
use quarry_store::{DAY_MS, InsightWindow, UsageCount};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{ApiError, Body, Params, ok, run_blocking};
use crate::limits::{ModelBudget, model_budget, server_model_tokens, set_model_budget};
use crate::state::AppState;

/// Days a view covers by default, and at most.
const DAYS_DEFAULT: i64 = 30;
const DAYS_MAX: i64 = 366;
/// Groups listed by default, and at most.
const GROUPS_DEFAULT: usize = 50;
const GROUPS_MAX: usize = 500;
/// How long a read waits for this node's queued searches to reach the store.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/insight/unanswered", get(unanswered))
        .route("/api/v1/insight/usage", get(usage))
        .route("/api/v1/insight/budget", get(budget).put(set_budget))
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

/// What a view was asked for.
struct ViewParams {
    days: i64,
    knowledge_base: Option<String>,
    limit: usize,
    csv: bool,
}

/// The query string, strictly: an unknown parameter is a 400 naming it.
fn parse(pairs: &[(String, String)], allowed: &[&str]) -> Result<ViewParams, ApiError> {
    let mut p = ViewParams {
        days: DAYS_DEFAULT,
        knowledge_base: None,
        limit: GROUPS_DEFAULT,
        csv: false,
    };
    for (k, v) in pairs {
        let v = v.trim();
        match k.as_str() {
            // The middleware's own parameters.
            "token" | "space_id" | "space" | "kb" | "resource" => {}
            "days" if allowed.contains(&"days") => {
                p.days = v
                    .parse()
                    .ok()
                    .filter(|d| (1..=DAYS_MAX).contains(d))
                    .ok_or_else(|| {
                        bad(format!(
                            "days must be a whole number from 1 to {DAYS_MAX}, not '{v}'"
                        ))
                    })?;
            }
            "knowledge_base" if allowed.contains(&"knowledge_base") => {
                p.knowledge_base = Some(v.to_owned()).filter(|s| !s.is_empty());
            }
            "limit" if allowed.contains(&"limit") => {
                p.limit = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=GROUPS_MAX).contains(n))
                    .ok_or_else(|| {
                        bad(format!("limit must be from 1 to {GROUPS_MAX}, not '{v}'"))
                    })?;
            }
            "format" if allowed.contains(&"format") => {
                p.csv = match v {
                    "" | "json" => false,
                    "csv" => true,
                    other => return Err(bad(format!("format must be json or csv, not '{other}'"))),
                };
            }
            other => {
                return Err(bad(format!(
                    "unknown parameter '{other}' (this view takes {})",
                    allowed.join(", ")
                )));
            }
        }
    }
    Ok(p)
}

/// The window: the last `days` whole UTC days, today included.
fn window(space_id: &str, days: i64) -> InsightWindow {
    let today = now_millis().div_euclid(DAY_MS);
    InsightWindow {
        space_id: space_id.to_owned(),
        knowledge_base: None,
        since: (today - days + 1) * DAY_MS,
        until: (today + 1) * DAY_MS,
    }
}

fn date(day: i64) -> String {
    quarry_core::iso8601_millis(day * DAY_MS)
        .chars()
        .take(10)
        .collect()
}

const VIEWING: &str = "reading the insight of a space (its admins and owners)";

/// `GET /api/v1/insight/unanswered?days=30&knowledge_base=…&limit=50`: the wordings searched
/// most that found nothing, similar ones merged, each with its searches per day.
async fn unanswered(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Params(params): Params<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let p = parse(&params, &["days", "knowledge_base", "limit"])?;
    caller
        .engine
        .scope()
        .require_manage(Access::Admin, VIEWING)?;
    let state = st.clone();
    let engine = caller.engine.clone();
    let mut w = window(&caller.principal.space_id, p.days);
    let (since, until) = (w.since, w.until);
    let kb_key = p.knowledge_base.clone();
    let (groups, knowledge_base) = run_blocking(move || -> Result<_, Error> {
        let kb = match &kb_key {
            Some(key) => {
                let kb = engine.knowledge_base(key)?;
                w.knowledge_base = Some(vec![
                    kb.id.clone(),
                    kb.name.clone(),
                    kb.collection_id.to_string(),
                ]);
                Some(json!({"id": kb.id, "name": kb.name}))
            }
            None => None,
        };
        if let Some(log) = state.audit() {
            log.flush(FLUSH_WAIT);
        }
        // More than asked: merging similar wordings folds some into others.
        let found = engine
            .store_handle()
            .unanswered_groups(&w, p.limit.saturating_mul(2))?;
        Ok((quarry_audit::wording::merge_similar(found), kb))
    })
    .await?;
    let kept = st.audit().is_some_and(|a| a.settings().insight_queries);
    let items: Vec<Value> = groups
        .into_iter()
        .take(p.limit)
        .map(|(g, variants)| {
            json!({
                "wording": g.wording,
                "question": g.query,
                "count": g.count,
                "first_at": quarry_core::iso8601_millis(g.first_at),
                "last_at": quarry_core::iso8601_millis(g.last_at),
                "best_score": g.best_score,
                "days": g.days.iter().map(|(d, n)| json!({"day": date(*d), "count": n})).collect::<Vec<_>>(),
                "variants": variants,
            })
        })
        .collect();
    Ok(ok(json!({
        "since": quarry_core::iso8601_millis(since),
        "until": quarry_core::iso8601_millis(until),
        "days": p.days,
        "knowledge_base": knowledge_base,
        "queries_kept": kept,
        "groups": items,
    })))
}

/// `GET /api/v1/insight/usage?days=30&format=json|csv`: every metric per day, the totals,
/// the subjects (tools, surfaces) and each person's and token's counts; CSV: one line per
/// day, metric, person and token.
async fn usage(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Params(params): Params<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let p = parse(&params, &["days", "format"])?;
    caller
        .engine
        .scope()
        .require_manage(Access::Admin, VIEWING)?;
    let state = st.clone();
    let engine = caller.engine.clone();
    let directory = st.directory().clone();
    let principal = caller.principal.clone();
    let w = window(&caller.principal.space_id, p.days);
    let (first_day, last_day) = (w.first_day(), w.last_day());
    let csv_wanted = p.csv;
    let (by_subject_rows, by_person_rows, names) = run_blocking(move || -> Result<_, Error> {
        let (_, names) = directory.usage_names_as(&principal, &w.space_id, VIEWING)?;
        if let Some(log) = state.audit() {
            log.flush(FLUSH_WAIT);
        }
        let store = engine.store_handle();
        // The CSV is per day, person and token; the page adds people up over the window.
        let subjects = if csv_wanted {
            Vec::new()
        } else {
            store.usage_by_subject(&w)?
        };
        Ok((subjects, store.usage_by_person(&w, csv_wanted)?, names))
    })
    .await?;
    let user = |id: &str| match id {
        "" => "(this machine's owner)".to_owned(),
        quarry_audit::usage::BACKGROUND => "(background work)".to_owned(),
        id => names
            .users
            .get(id)
            .cloned()
            .unwrap_or_else(|| "(a former member)".into()),
    };
    let token = |id: &str| match id {
        "" => String::new(),
        id => names
            .tokens
            .get(id)
            .cloned()
            .unwrap_or_else(|| "(revoked)".into()),
    };
    if p.csv {
        return Ok(csv(&by_person_rows, &user, &token));
    }
    let days: Vec<i64> = (first_day..=last_day).collect();
    let mut series: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut totals: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut subjects: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    // (user, token) → (metric → count, metric → total where the metric carries one)
    type Figures<'a> = (BTreeMap<&'a str, u64>, BTreeMap<&'a str, u64>);
    let mut people: BTreeMap<(&str, &str), Figures<'_>> = BTreeMap::new();
    for c in &by_subject_rows {
        let slot = usize::try_from(c.day - first_day).unwrap_or(0);
        let line = series
            .entry(c.metric.as_str())
            .or_insert_with(|| vec![0; days.len()]);
        if let Some(n) = line.get_mut(slot) {
            *n += c.count;
        }
        let t = totals.entry(c.metric.as_str()).or_default();
        t.0 += c.count;
        t.1 += c.total;
        if !c.subject.is_empty() {
            let s = subjects
                .entry((c.metric.as_str(), c.subject.as_str()))
                .or_default();
            s.0 += c.count;
            s.1 += c.total;
        }
    }
    for c in &by_person_rows {
        let (counts, totals) = people
            .entry((c.user_id.as_str(), c.token_id.as_str()))
            .or_default();
        counts.insert(c.metric.as_str(), c.count);
        if c.total > 0 {
            totals.insert(c.metric.as_str(), c.total);
        }
    }
    let metrics: Vec<Value> = METRICS
        .iter()
        .map(|m| {
            let (count, total) = totals.get(m).copied().unwrap_or_default();
            json!({
                "metric": m,
                "count": count,
                "total": total,
                "per_day": series.get(m).cloned().unwrap_or_else(|| vec![0; days.len()]),
            })
        })
        .collect();
    let by_subject: Vec<Value> = subjects
        .iter()
        .map(|((metric, subject), (count, total))| {
            json!({"metric": metric, "subject": subject, "count": count, "total": total})
        })
        .collect();
    let by_person: Vec<Value> = people
        .iter()
        .map(|((user_id, token_id), (counts, totals))| {
            json!({
                "user_id": Some(user_id).filter(|u| !u.is_empty()),
                "user": user(user_id),
                "token_id": Some(token_id).filter(|t| !t.is_empty()),
                "token": Some(token(token_id)).filter(|t| !t.is_empty()),
                "counts": counts,
                "totals": totals,
            })
        })
        .collect();
    Ok(ok(json!({
        "since": quarry_core::iso8601_millis(first_day * DAY_MS),
        "until": quarry_core::iso8601_millis((last_day + 1) * DAY_MS),
        "days": days.iter().map(|d| date(*d)).collect::<Vec<_>>(),
        "metrics": metrics,
        "subjects": by_subject,
        "people": by_person,
    })))
}

/// One field of a CSV line, quoted when it must be (RFC 4180); a leading `=`, `+`, `-` or
/// `@` is prefixed with `'` so a spreadsheet does not run a name as a formula.
fn field(text: &str) -> String {
    let safe = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if safe.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", safe.replace('"', "\"\""))
    } else {
        safe
    }
}

fn csv(
    counts: &[UsageCount],
    user: &dyn Fn(&str) -> String,
    token: &dyn Fn(&str) -> String,
) -> Response {
    let mut body = String::from("day,metric,user,user_id,token,token_id,count,total\n");
    for c in counts {
        let line = [
            date(c.day),
            c.metric.clone(),
            user(&c.user_id),
            c.user_id.clone(),
            token(&c.token_id),
            c.token_id.clone(),
            c.count.to_string(),
            c.total.to_string(),
        ]
        .iter()
        .map(|f| field(f))
        .collect::<Vec<_>>()
        .join(",");
        body.push_str(&line);
        body.push('\n');
    }
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    response.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"quarry-usage.csv\""),
    );
    response
}

/// The largest monthly limit accepted (a typo of many digits is refused, not stored).
const BUDGET_MAX: u64 = 1_000_000_000_000_000;

fn budget_json(b: &ModelBudget) -> Value {
    let limit = b.limit();
    json!({
        "monthly_model_tokens": b.own,
        "server_limit": b.server,
        "limit": limit,
        "used": b.used,
        "remaining": limit.map(|l| l.saturating_sub(b.used)),
        "month": date(b.month.0.div_euclid(DAY_MS)).chars().take(7).collect::<String>(),
        "resets_at": quarry_core::iso8601_millis(b.month.1),
    })
}

/// `GET /api/v1/insight/budget`: the model tokens the space spent this month (chat,
/// embeddings, expansion, reranking), its owner's monthly limit, the server's ceiling and
/// the limit that applies.
async fn budget(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Params(params): Params<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    parse(&params, &[])?;
    caller
        .engine
        .scope()
        .require_manage(Access::Admin, VIEWING)?;
    let state = st.clone();
    let server = server_model_tokens(&st);
    let store = caller.engine.store_handle();
    let space_id = caller.principal.space_id.clone();
    let b = run_blocking(move || {
        if let Some(log) = state.audit() {
            log.flush(FLUSH_WAIT);
        }
        model_budget(store.as_ref(), server, &space_id, true)
    })
    .await?;
    Ok(ok(budget_json(&b)))
}

/// `PUT /api/v1/insight/budget` with `{"monthly_model_tokens": 500000}` (`null`: none of
/// the space's own): the space's owners only. The server's `QUARRY_MONTHLY_MODEL_TOKENS`
/// stays the ceiling: a larger figure is kept, and the server's applies.
async fn set_budget(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Params(params): Params<Vec<(String, String)>>,
    Body(body): Body<Value>,
) -> Result<Response, ApiError> {
    parse(&params, &[])?;
    let fields = body
        .as_object()
        .ok_or_else(|| bad("the body must be a JSON object: {\"monthly_model_tokens\": 500000} or null to remove the limit"))?;
    if let Some(other) = fields.keys().find(|k| k.as_str() != "monthly_model_tokens") {
        return Err(bad(format!(
            "unknown field '{other}' (the body takes monthly_model_tokens)"
        )));
    }
    let tokens = match fields.get("monthly_model_tokens") {
        None => {
            return Err(bad(
                "monthly_model_tokens is required: a whole number of tokens, or null to remove the space's own limit",
            ));
        }
        Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().filter(|n| (1..=BUDGET_MAX).contains(n)).ok_or_else(|| {
            bad(format!(
                "monthly_model_tokens must be a whole number from 1 to {BUDGET_MAX}, or null to remove the limit, not {v}"
            ))
        })?),
    };
    let directory = st.directory().clone();
    let principal = caller.principal.clone();
    let store = caller.engine.store_handle();
    let server = server_model_tokens(&st);
    let b = st
        .write(move || {
            let space_id = &principal.space_id;
            directory.check_space_owner(
                &principal,
                space_id,
                "setting the monthly model tokens of",
            )?;
            set_model_budget(store.as_ref(), space_id, tokens)?;
            model_budget(store.as_ref(), server, space_id, true)
        })
        .await?;
    Ok(ok(budget_json(&b)))
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn csv_fields_are_quoted_and_never_formulas() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(field("-2,x"), "\"'-2,x\"");
    }
}
