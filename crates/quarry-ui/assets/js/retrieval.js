// The retrieval test page of a knowledge base (`#/kb/<id>/test`, issue 44 "people curate").
// Loaded by kb.js on first use. One form runs `POST /api/v1/knowledge-search` over this
// knowledge base with `"explain": true` and shows:
// - the request, as JSON and as a `curl` command, to reproduce it elsewhere;
// - a summary: how many passages matched, the mode that ran, whether the reranker ran, the
//   warnings, and the `explain` block (the filter as the server read it, how many documents
//   it leaves, the moment knowledge was read at);
// - the passages in the API's order, each with its score exactly as returned (the raw number in
//   `data-score`), and an "Explain" disclosure with its evidence: keyword (BM25, rank,
//   coverage), vector (similarity, rank), the score before reranking and the reranker's.
// Errors are shown as the API words them; nothing typed is lost.

import { ApiError, announce, api, app, copyButton, errorBlock, fmtDate, fmtNumber, h, icon, navigate, replace, serverText, t } from "./app.js";

const KB_BASE = "/api/v1/knowledge-bases";
const SEARCH = "/api/v1/knowledge-search";
const MODES = ["hybrid", "keyword", "vector"];
const RERANK = ["applied", "not_requested", "not_configured", "failed"];
/** The API's defaults (quarry-engine's KnowledgeSearch::new). */
const DEFAULTS = { top_k: 10, min_score: 0.5 };

/** `t()` with `<key>_one` or `<key>_other`, chosen by `vars.n`. */
const tn = (key, vars) => t(`${key}_${Number(vars.n) === 1 ? "one" : "other"}`, vars);
/** A number with at most `digits` decimals ("0.8312"), as text; "—" when it is not one. */
const fix = (x, digits = 4) => (typeof x === "number" && Number.isFinite(x) ? String(Number(x.toFixed(digits))) : "—");
/** Text in single quotes for a POSIX shell. */
const shellQuote = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;

/** The `curl` command that sends `body` as this page did (the caller's own token in $QUARRY_TOKEN). */
export function curlCommand(body, { origin, token = false, space = null } = {}) {
  const lines = [`curl -sS -X POST ${shellQuote(`${origin}${SEARCH}`)}`, `  -H 'Content-Type: application/json'`];
  if (token) lines.push(`  -H "Authorization: Bearer $QUARRY_TOKEN"`);
  if (space) lines.push(`  -H ${shellQuote(`X-Space-ID: ${space}`)}`);
  lines.push(`  -d ${shellQuote(JSON.stringify(body))}`);
  return lines.join(" \\\n");
}

export async function retrievalPage({ root, params, signal, session }) {
  const key = params[0];
  const crumbs = (kb) =>
    h(
      "nav",
      { class: "kb-crumbs", "aria-label": t("kb.breadcrumb") },
      h("a", { href: "#/kb" }, t("kb.title")),
      h("span", { "aria-hidden": "true" }, " / "),
      kb ? h("a", { href: `#/kb/${encodeURIComponent(kb.id)}` }, kb.name) : h("span", {}, key),
      h("span", { "aria-hidden": "true" }, " / "),
      h("span", { "aria-current": "page" }, t("rt.title")),
    );
  replace(root, h("p", { class: "loading" }, t("common.loading")));
  let kb;
  try {
    const all = await api("GET", KB_BASE, { signal });
    kb = all.find((k) => k.id === key) || all.find((k) => k.name === key);
    if (!kb) throw new ApiError(404, t("kb.not_found", { id: key }));
  } catch (e) {
    if (signal.aborted || e.name === "AbortError") return;
    replace(root, crumbs(null), h("div", { class: "page-head" }, h("h1", {}, t("rt.title"))), errorBlock(e, () => navigate(location.hash)));
    root.dataset.ready = "true";
    return;
  }
  document.title = `${t("rt.title")} · ${kb.name} · Quarry`;

  // --- The form ----------------------------------------------------------------------------
  const field = (id, label, control, hint) => {
    control.id = `rt-${id}`;
    if (hint) control.setAttribute("aria-describedby", `rt-${id}-hint`);
    return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hint ? h("span", { class: "hint", id: `rt-${id}-hint` }, hint) : null);
  };
  const query = h("textarea", { name: "query", rows: "2", required: true, maxlength: "2000", spellcheck: "false", placeholder: t("kb.search.placeholder") });
  const mode = h("select", { name: "search_mode" }, MODES.map((m) => h("option", { value: m }, t(`kb.search.mode.${m}`))));
  const topK = h("input", { name: "top_k", type: "number", min: "1", max: "50", step: "1", inputmode: "numeric", value: String(DEFAULTS.top_k) });
  const minScore = h("input", { name: "min_score", type: "number", min: "0", max: "1", step: "0.01", inputmode: "decimal", value: String(DEFAULTS.min_score) });
  const rerank = h("input", { id: "rt-rerank", name: "rerank", type: "checkbox", checked: true });
  const filter = h("textarea", { name: "filter", rows: "3", spellcheck: "false", class: "rt-mono", placeholder: '{"field": "status", "operator": "eq", "value": "published"}' });
  const asOf = h("input", { name: "as_of", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "2026-01-31" });
  const error = h("p", { class: "form-error rt-error", role: "alert", dataset: { testid: "retrieval-error" } });
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, icon("search"), t("rt.run"));
  const form = h(
    "form",
    { class: "card rt-form", novalidate: true, "aria-labelledby": "rt-form-title", dataset: { testid: "retrieval-form" } },
    h("h2", { id: "rt-form-title", class: "sr-only" }, t("rt.form")),
    field("query", t("rt.query"), query),
    h(
      "div",
      { class: "rt-opts" },
      field("mode", t("kb.search.mode"), mode),
      field("top-k", t("rt.top_k"), topK),
      field("min-score", t("kb.search.min_score"), minScore),
      h("div", { class: "field rt-check" }, h("label", { for: rerank.id }, rerank, t("rt.rerank"))),
    ),
    field("filter", t("rt.filter"), filter, t("rt.filter_hint")),
    field("as-of", t("rt.as_of"), asOf, t("rt.as_of_hint")),
    error,
    h("div", { class: "row" }, submit),
  );

  const request = h("section", { class: "card rt-request", hidden: true, "aria-labelledby": "rt-request-title", dataset: { testid: "retrieval-request" } });
  const summary = h("section", { class: "card rt-summary", hidden: true, "aria-labelledby": "rt-summary-title", dataset: { testid: "retrieval-summary" } });
  const results = h("div", { class: "rt-results", "aria-live": "polite", "aria-busy": "false" });

  replace(
    root,
    crumbs(kb),
    h("div", { class: "page-head" }, h("h1", {}, t("rt.title"))),
    h("p", { class: "muted rt-intro" }, t("rt.intro", { name: kb.name })),
    form,
    request,
    summary,
    results,
  );
  root.dataset.ready = "true";
  query.focus();

  const fail = (message, el) => {
    error.textContent = message;
    for (const x of [query, topK, minScore, filter, asOf]) x.removeAttribute("aria-invalid");
    if (el) {
      el.setAttribute("aria-invalid", "true");
      el.focus();
    }
  };

  /** The request body from the form; null (with the error shown) when it cannot be sent. */
  function body() {
    const q = query.value.trim();
    if (!q) return fail(t("rt.query_required"), query), null;
    const b = {
      query: q,
      knowledge_base_ids: [kb.id],
      search_mode: mode.value,
      top_k: topK.value.trim() === "" ? DEFAULTS.top_k : Number(topK.value),
      min_score: minScore.value.trim() === "" ? DEFAULTS.min_score : Number(minScore.value),
      rerank: rerank.checked,
      explain: true,
    };
    const f = filter.value.trim();
    if (f) {
      try {
        b.filter = JSON.parse(f);
      } catch (e) {
        return fail(t("rt.filter_invalid", { detail: e.message }), filter), null;
      }
    }
    const at = asOf.value.trim();
    if (at) b.as_of = at;
    return b;
  }

  function showRequest(b) {
    const json = JSON.stringify(b, null, 2);
    const curl = curlCommand(b, {
      origin: location.origin,
      token: session?.mode === "token",
      space: (session?.spaces || []).length > 1 ? app.space : null,
    });
    request.hidden = false;
    replace(
      request,
      h("h2", { id: "rt-request-title" }, t("rt.request")),
      h("p", { class: "hint" }, t("rt.request_hint")),
      h("div", { class: "rt-code-head" }, h("h3", {}, "JSON"), copyButton(json, t("rt.copy_json"))),
      h("pre", { class: "rt-code", dataset: { testid: "retrieval-request-json" } }, json),
      h("div", { class: "rt-code-head" }, h("h3", {}, "curl"), copyButton(curl, t("rt.copy_curl"))),
      h("pre", { class: "rt-code", dataset: { testid: "retrieval-request-curl" } }, curl),
    );
  }

  let controller = null;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    fail("");
    const b = body();
    if (!b) return;
    showRequest(b);
    if (controller) controller.abort();
    controller = new AbortController();
    signal.addEventListener("abort", () => controller.abort(), { once: true });
    results.setAttribute("aria-busy", "true");
    replace(results, h("p", { class: "loading" }, t("kb.search.searching")));
    submit.disabled = true;
    try {
      const out = await api("POST", SEARCH, { body: b, signal: controller.signal });
      drawSummary(out);
      drawResults(out, b);
    } catch (err) {
      if (err.name === "AbortError" || signal.aborted) return;
      summary.hidden = true;
      replace(results);
      fail(err.message);
      announce(err.message, { assertive: true });
    } finally {
      submit.disabled = false;
      results.setAttribute("aria-busy", "false");
    }
  });

  // --- The answer --------------------------------------------------------------------------
  const facts = (rows) =>
    h(
      "dl",
      { class: "rt-facts" },
      rows.filter(Boolean).map(([label, value, testid]) => h("div", { class: "rt-fact", dataset: testid ? { testid } : {} }, h("dt", {}, label), h("dd", {}, value))),
    );

  function drawSummary(out) {
    const ex = out?.explain || {};
    const warnings = out?.warnings || [];
    const filterText =
      ex.filter === null || ex.filter === undefined
        ? t("rt.none")
        : h("pre", { class: "rt-code rt-filter-json" }, typeof ex.filter === "string" ? prettyJson(ex.filter) : JSON.stringify(ex.filter, null, 2));
    summary.hidden = false;
    Object.assign(summary.dataset, {
      total: String(out?.total_count ?? ""),
      mode: String(out?.search_mode ?? ""),
      rerank: String(out?.rerank ?? ""),
    });
    const filters = h(
      "div",
      {
        class: "rt-filters",
        dataset: {
          testid: "retrieval-filters",
          matching: ex.documents_matching_filter === null || ex.documents_matching_filter === undefined ? "" : String(ex.documents_matching_filter),
          asOf: ex.as_of === null || ex.as_of === undefined ? "" : String(ex.as_of),
        },
      },
      h("h3", {}, t("rt.explain_title")),
      facts([
        [t("rt.f.filter"), filterText, "retrieval-filter"],
        ex.documents_matching_filter !== null && ex.documents_matching_filter !== undefined
          ? [t("rt.f.matching"), tn("rt.n_documents", { n: fmtNumber(ex.documents_matching_filter) }), "retrieval-matching"]
          : null,
        ex.as_of !== null && ex.as_of !== undefined ? [t("rt.f.as_of"), fmtDate(ex.as_of), "retrieval-as-of"] : null,
      ]),
    );
    replace(
      summary,
      h("h2", { id: "rt-summary-title" }, t("rt.summary")),
      facts([
        [t("rt.f.total"), fmtNumber(out?.total_count ?? 0), "retrieval-total"],
        [t("rt.f.mode"), MODES.includes(out?.search_mode) ? t(`kb.search.mode.${out.search_mode}`) : String(out?.search_mode ?? "—"), "retrieval-mode"],
        [t("rt.f.rerank"), RERANK.includes(out?.rerank) ? t(`rt.rerank.${out.rerank}`) : String(out?.rerank ?? "—"), "retrieval-rerank"],
        [
          t("rt.f.warnings"),
          warnings.length ? h("ul", { class: "rt-warnings" }, warnings.map((w) => h("li", {}, serverText(w)))) : t("rt.none"),
          "retrieval-warnings",
        ],
      ]),
      filters,
    );
  }

  function drawResults(out, b) {
    const hits = out?.results || [];
    announce(tn("kb.search.count", { n: hits.length }));
    if (!hits.length) {
      replace(
        results,
        h("div", { class: "empty", dataset: { testid: "retrieval-empty" } }, h("p", {}, t("rt.empty", { min: String(b.min_score) })), h("p", { class: "muted" }, t("rt.empty_hint"))),
      );
      return;
    }
    replace(
      results,
      h("h2", { class: "rt-results-title" }, tn("rt.results", { n: fmtNumber(hits.length) })),
      h("ol", { class: "rt-hits", dataset: { testid: "retrieval-results" } }, hits.map((hit, i) => hitItem(hit, i + 1))),
    );
  }

  function hitItem(hit, rank) {
    const file = hit.knowledge_filename || hit.file || hit.knowledge_id;
    // The heading path usually starts with the document's title ("Guide › Install"): then it
    // says both.
    const heading = hit.heading || "";
    const title = hit.knowledge_title && hit.knowledge_title !== file && !heading.startsWith(hit.knowledge_title) ? hit.knowledge_title : "";
    const href = `#/kb/${encodeURIComponent(kb.id)}?doc=${encodeURIComponent(hit.knowledge_id)}${hit.page ? `&page=${hit.page}` : ""}`;
    return h(
      "li",
      { class: "card rt-hit", dataset: { testid: "retrieval-hit", id: String(hit.id), score: String(hit.score), rank: String(rank) } },
      h(
        "div",
        { class: "rt-hit-head" },
        h("span", { class: "rt-rank", "aria-label": t("rt.rank_is", { n: rank }) }, `#${rank}`),
        h("span", { class: "badge badge-info rt-score", title: t("kb.search.score") }, t("kb.search.score_is", { score: fix(hit.score) })),
        h("span", { class: "badge" }, hit.match_type ? t(`kb.search.match.${hit.match_type}`) : "—"),
        h("a", { class: "kb-cite", href }, hit.page ? t("kb.cite_page", { file, page: hit.page }) : file),
      ),
      // The document's title (when it is not its file name) and the heading the passage is under.
      title || heading
        ? h(
            "p",
            { class: "rt-hit-where muted" },
            title ? h("span", { class: "rt-hit-title" }, title) : null,
            title && heading ? h("span", { "aria-hidden": "true" }, " › ") : null,
            heading ? h("span", { class: "rt-hit-heading", dataset: { testid: "retrieval-heading" } }, heading) : null,
          )
        : null,
      h("p", { class: "rt-hit-text" }, hit.content || ""),
      explain(hit, rank),
    );
  }

  function explain(hit, rank) {
    const ev = hit.evidence;
    const rows = ev
      ? [
          [
            t("rt.ev.keyword"),
            ev.keyword
              ? t("rt.ev.keyword_is", { bm25: fix(ev.keyword.bm25, 3), rank: ev.keyword.rank + 1, coverage: fix(ev.keyword.coverage, 3) })
              : t("rt.ev.no_keyword"),
            "explain-keyword",
          ],
          [
            t("rt.ev.vector"),
            ev.vector ? t("rt.ev.vector_is", { similarity: fix(ev.vector.similarity), rank: ev.vector.rank + 1 }) : t("rt.ev.no_vector"),
            "explain-vector",
          ],
          [t("rt.ev.retrieval"), fix(ev.retrieval), "explain-retrieval"],
          ev.rerank !== null && ev.rerank !== undefined ? [t("rt.ev.rerank"), fix(ev.rerank), "explain-rerank"] : null,
          [t("rt.ev.embedded"), ev.embedded ? t("rt.yes") : t("rt.no"), "explain-embedded"],
        ]
      : null;
    return h(
      "details",
      { class: "rt-explain", dataset: { testid: "retrieval-explain" } },
      h("summary", {}, t("rt.explain"), h("span", { class: "sr-only" }, ` ${t("rt.rank_is", { n: rank })}`)),
      rows ? facts(rows) : h("p", { class: "muted" }, t("rt.ev.none")),
    );
  }
}

/** JSON text pretty-printed (as it came when it is not JSON). */
function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
