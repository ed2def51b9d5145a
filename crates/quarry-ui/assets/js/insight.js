// `#/insight`: what a space's knowledge is asked and cannot answer, and usage over time
// (issue 69 item 4), for the space's admins and owners; anyone else gets the API's refusal.
//
// Routes:
// - `GET /api/v1/insight/unanswered?days=&knowledge_base=&limit=`: the wordings searched most
//   that found nothing (similar ones merged), with counts per day; `question` is null when
//   the administrator does not keep query text (QUARRY_INSIGHT_QUERIES=off);
// - `GET /api/v1/insight/usage?days=` (and `&format=csv`): daily counts per metric, the
//   subjects (tools, search surfaces), people and tokens;
// - `GET /api/v1/insight/budget`: this UTC month's model tokens (`used`), the owner's monthly
//   limit (`monthly_model_tokens`), the server's ceiling (`server_limit`) and the one that
//   applies (`limit`); `PUT` with `{"monthly_model_tokens": n | null}` sets or removes the
//   owner's (the space's owners only: anyone else gets the API's 403, shown by the form);
// - per unanswered group, as the viewer (so nobody sees what they may not read):
//   "Closest passage" `POST /api/v1/knowledge-search {"question", "min_score": 0, "top_k": 1}`;
//   "Write a note" `POST /api/v1/mcp?resource=<kb name>` calling `create_knowledge` (a
//   knowledge note, QukaAI's capture endpoint: there is no REST route for notes);
//   "Request a page" `PUT /api/v1/knowledge-bases/{id}/pages/{slug}` (`status: draft`, tag
//   `requested`; a second request is the API's 409, shown beside the group);
//   "Add a source" links to `#/kb/<id>/sources?add=1&question=<text>` (the Sources tab with
//   its Add source dialog open, for that question; no `question` when the text is not kept).
//
// The address keeps the choices: `#/insight?tab=usage&days=7&kb=<id>&into=<id>`. Charts are
// inline SVG with a data table beside them; nothing is drawn from a library.

import { ApiError, announce, api, apiHeaders, app, emptyState, errorBlock, fmtDate, fmtNumber, h, icon, openDialog, pageHeader, replace, serverText, t, tabs, toast } from "./app.js";

const KB_BASE = "/api/v1/knowledge-bases";
const UNANSWERED = "/api/v1/insight/unanswered";
const USAGE = "/api/v1/insight/usage";
const BUDGET = "/api/v1/insight/budget";
const SEARCH = "/api/v1/knowledge-search";
const MCP = "/api/v1/mcp";
const WINDOWS = [7, 30, 90];
const LIMIT = 50;
/** The metrics the server counts, in its order (quarry-audit's METRICS). */
const METRICS = ["searches", "unanswered", "chat_answers", "model_tokens", "tool_calls", "tool_failures", "approvals", "approval_decisions", "uploads", "sync_failures", "sign_ins"];
/** The metrics drawn in the chart (the others are in the cards and the table). */
const CHARTED = ["searches", "unanswered", "chat_answers", "tool_calls", "uploads"];
/** A slug as the engine's check_slug takes it. */
const SLUG = /^[a-z0-9][a-z0-9-]{0,99}$/;
const DAY_MS = 86_400_000;
const SVG_NS = "http://www.w3.org/2000/svg";

/** `t()` with `<key>_one` or `<key>_other`, chosen by `vars.n`. */
const tn = (key, vars) => t(`${key}_${Number(vars.n) === 1 ? "one" : "other"}`, vars);
/** A score with at most 2 decimals; "—" when there is none. */
const score = (x) => (typeof x === "number" && Number.isFinite(x) ? String(Number(x.toFixed(2))) : "—");
const isAbort = (e) => e && (e.name === "AbortError" || e.code === "aborted");

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** app.js's icon() has no download arrow: the same kind of decorative SVG. */
function downloadIcon() {
  const el = icon("upload");
  el.replaceChildren(svg("path", { d: "M12 4v12M7 11l5 5 5-5M4 20h16" }));
  return el;
}

/** "3 hours ago", "yesterday": `ms` relative to now, in the page's language. */
function relative(ms, now = Date.now()) {
  const diff = ms - now;
  const abs = Math.abs(diff);
  const rtf = new Intl.RelativeTimeFormat(app.lang, { numeric: "auto" });
  if (abs < 45_000) return rtf.format(Math.round(diff / 1000), "second");
  if (abs < 45 * 60_000) return rtf.format(Math.round(diff / 60_000), "minute");
  if (abs < 22 * 3_600_000) return rtf.format(Math.round(diff / 3_600_000), "hour");
  return rtf.format(Math.round(diff / DAY_MS), "day");
}

/** A day ("2026-12-07", UTC) in the page's language, short ("Dec 7"). */
function fmtDay(day, opts = { month: "short", day: "numeric" }) {
  const d = new Date(`${day}T00:00:00Z`);
  return Number.isNaN(d.getTime()) ? day : d.toLocaleDateString(app.lang, { ...opts, timeZone: "UTC" });
}

/** The days of a window, oldest first ("2026-11-08" …), from its `since` and length. */
function windowDays(since, n) {
  const start = Date.parse(since);
  const first = Number.isNaN(start) ? Math.floor(Date.now() / DAY_MS) * DAY_MS - (n - 1) * DAY_MS : start;
  return Array.from({ length: n }, (_, i) => new Date(first + i * DAY_MS).toISOString().slice(0, 10));
}

/** A translated sentence with a node where its `{…}` placeholder was filled with "\u0000". */
function withNode(text, node) {
  const [before, after = ""] = text.split("\u0000");
  return [before, node, after];
}

/** A wait in milliseconds as "45 s", "3.5 min", "2.1 h". */
function fmtWait(ms) {
  const s = ms / 1000;
  if (s < 90) return t("insight.wait_s", { n: fmtNumber(Math.round(s)) });
  if (s < 5400) return t("insight.wait_min", { n: (s / 60).toLocaleString(app.lang, { maximumFractionDigits: 1 }) });
  return t("insight.wait_h", { n: (s / 3600).toLocaleString(app.lang, { maximumFractionDigits: 1 }) });
}

/** A page's slug from a question: lower-case ASCII letters and digits joined by '-', at most
 * 80 characters; a question with none of those (Chinese) gets `request-<hash>`. */
export function slugFor(question, wording) {
  const base = String(question || "")
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  let slug = base.slice(0, 80);
  // Cut at a word's end, not inside one.
  if (base.length > 80 && base[80] !== "-" && slug.includes("-")) slug = slug.replace(/-[^-]*$/, "");
  slug = slug.replace(/-+$/, "");
  if (!SLUG.test(slug)) {
    let hash = 2166136261;
    for (const ch of String(question || wording || "")) hash = Math.imul(hash ^ ch.codePointAt(0), 16777619) >>> 0;
    slug = `request-${hash.toString(36)}`;
  }
  return slug;
}

// ---------------------------------------------------------------------------------------
// Page

export async function render({ root, query, signal }) {
  const state = {
    tab: query.get("tab") === "usage" ? "usage" : "unanswered",
    days: WINDOWS.includes(Number(query.get("days"))) ? Number(query.get("days")) : 30,
    kb: query.get("kb") || "",
    into: query.get("into") || "",
    kbs: [],
    unanswered: null,
    usage: null,
    /** This month's model tokens and limits: `{loading, data}` (the last data while it
     * reloads), `{data}` or `{error}`. */
    budget: null,
    /** What each group's actions did on this page, by wording: kept across redraws. */
    done: new Map(),
  };
  replace(root, pageHeader(t("insight.title")), h("p", { class: "loading" }, t("common.loading")));

  // The knowledge bases first: a caller who may not read the insight still gets its list
  // (the refusal comes from the insight routes themselves).
  try {
    state.kbs = await api("GET", KB_BASE, { signal });
    if (!Array.isArray(state.kbs)) state.kbs = [];
  } catch (e) {
    if (signal.aborted || isAbort(e)) return;
    replace(root, pageHeader(t("insight.title")), errorBlock(e, () => location.reload()));
    root.dataset.ready = "true";
    return;
  }
  const kbById = (id) => state.kbs.find((k) => k.id === id) || state.kbs.find((k) => k.name === id) || null;
  if (state.kb && !kbById(state.kb)) state.kb = "";
  if (state.into && !kbById(state.into)) state.into = "";
  if (state.kb) state.kb = kbById(state.kb).id;
  if (state.into) state.into = kbById(state.into).id;
  /** The knowledge base answers are written in: the target chosen, else the filter's. */
  const target = () => kbById(state.into || state.kb);

  // ---- Controls
  const daysSel = h(
    "select",
    // The budget is per month: a new window does not reload it.
    { id: "insight-days", name: "days", onchange: () => ((state.days = Number(daysSel.value)), remember(), load({ budget: false })) },
    WINDOWS.map((d) => h("option", { value: String(d), selected: d === state.days }, tn("insight.last_days", { n: d }))),
  );
  const kbOptions = (none) => [h("option", { value: "" }, none), state.kbs.map((k) => h("option", { value: k.id }, k.name))];
  const kbSel = h("select", { id: "insight-kb", name: "knowledge_base", onchange: () => ((state.kb = kbSel.value), remember(), loadUnanswered()) }, kbOptions(t("insight.all_kbs")));
  kbSel.value = state.kb;
  const intoSel = h(
    "select",
    { id: "insight-into", name: "into", "aria-describedby": "insight-into-hint", onchange: () => ((state.into = intoSel.value), remember(), drawUnanswered()) },
    kbOptions(t("insight.into_none")),
  );
  intoSel.value = state.into;
  const field = (control, label, hint) =>
    h("div", { class: "field" }, h("label", { for: control.id }, label), control, hint ? h("span", { class: "hint", id: `${control.id}-hint` }, hint) : null);
  const controls = h(
    "div",
    { class: "card ins-controls", role: "group", "aria-label": t("insight.controls") },
    field(daysSel, t("insight.window")),
    field(kbSel, t("insight.kb_filter")),
    field(intoSel, t("insight.into"), t("insight.into_hint")),
  );

  // ---- Tabs
  let unansweredPanel = null;
  let usagePanel = null;
  // tabs() selects its first tab as it is built (and onChange records that): the address's
  // tab is kept aside and selected once the page is built.
  const firstTab = state.tab;
  const tabSet = tabs(
    [
      { id: "unanswered", label: t("insight.tab.unanswered"), render: (p) => ((unansweredPanel = p), drawUnanswered()) },
      { id: "usage", label: t("insight.tab.usage"), render: (p) => ((usagePanel = p), drawUsage()) },
    ],
    {
      label: t("insight.sections"),
      onChange: (id) => {
        state.tab = id;
        remember();
      },
    },
  );
  tabSet.el.querySelectorAll('[role="tab"]').forEach((b, i) => (b.dataset.testid = `insight-tab-${["unanswered", "usage"][i]}`));
  const refresh = h("button", { class: "btn", type: "button", onclick: () => load({ announceIt: true }) }, icon("refresh"), t("common.refresh"));
  replace(root, pageHeader(t("insight.title"), refresh), h("p", { class: "muted ins-intro" }, t("insight.intro")), controls, tabSet.el);

  /** Keeps the choices in the address (a reload comes back to them) without re-rendering. */
  function remember() {
    const q = new URLSearchParams();
    if (state.tab !== "unanswered") q.set("tab", state.tab);
    if (state.days !== 30) q.set("days", String(state.days));
    if (state.kb) q.set("kb", state.kb);
    if (state.into) q.set("into", state.into);
    const s = q.toString();
    history.replaceState(null, "", s ? `#/insight?${s}` : "#/insight");
  }

  // ---- Loading
  // One GET into `state[key]`: a newer load of the same key aborts the older (leaving the
  // page aborts them all). While it runs the state is `{loading}` (with the last `data` when
  // `keep`), then `{data}` or `{error}`; `draw` redraws its part of the page each time.
  const loads = {};
  async function loadInto(key, path, query, draw, { keep = false, loaded } = {}) {
    loads[key]?.abort();
    const ctl = (loads[key] = new AbortController());
    signal.addEventListener("abort", () => ctl.abort(), { once: true });
    state[key] = keep ? { loading: true, data: state[key]?.data } : { loading: true };
    draw();
    try {
      const data = await api("GET", path, { query, signal: ctl.signal });
      if (ctl.signal.aborted) return;
      state[key] = { data };
      loaded?.();
    } catch (e) {
      if (ctl.signal.aborted || isAbort(e)) return;
      state[key] = { error: e };
    }
    draw();
  }

  const loadUnanswered = () =>
    loadInto("unanswered", UNANSWERED, { days: state.days, knowledge_base: state.kb || undefined, limit: LIMIT }, drawUnanswered);
  const loadUsage = () => loadInto("usage", USAGE, { days: state.days }, drawUsage);
  const loadBudget = () => loadInto("budget", BUDGET, undefined, drawBudget, { keep: true, loaded: fillBudgetInput });

  async function load({ announceIt = false, budget = true } = {}) {
    await Promise.all([loadUnanswered(), loadUsage(), budget ? loadBudget() : null]);
    if (signal.aborted) return;
    const failed = state.unanswered?.error || state.usage?.error || (budget && state.budget?.error);
    if (announceIt) announce(failed ? failed.message : t("insight.loaded"));
  }

  // ---- Unanswered questions
  function drawUnanswered() {
    const panel = unansweredPanel;
    if (!panel) return;
    const into = target();
    intoSel.value = state.into;
    const u = state.unanswered;
    if (!u || u.loading) {
      panel.setAttribute("aria-busy", "true");
      if (!panel.querySelector(".ins-group")) replace(panel, h("p", { class: "loading" }, t("common.loading")));
      return;
    }
    panel.removeAttribute("aria-busy");
    if (u.error) {
      replace(panel, h("div", { dataset: { testid: "insight-error" } }, errorBlock(u.error, () => loadUnanswered())));
      return;
    }
    const d = u.data || {};
    const groups = Array.isArray(d.groups) ? d.groups : [];
    const days = windowDays(d.since, Number(d.days) || state.days);
    const scope = d.knowledge_base ? t("insight.scope_kb", { name: d.knowledge_base.name }) : t("insight.scope_all");
    const head = h(
      "div",
      { class: "ins-section-head" },
      h("h2", { id: "ins-unanswered-title" }, t("insight.unanswered_title")),
      h("p", { class: "muted" }, tn("insight.unanswered_summary", { n: groups.length, days: Number(d.days) || state.days, scope })),
      d.queries_kept === false ? h("p", { class: "ins-note", dataset: { testid: "insight-text-off" } }, t("insight.text_off")) : null,
      into ? null : h("p", { class: "ins-note", id: "ins-need-kb", dataset: { testid: "insight-need-kb" } }, t("insight.need_kb")),
    );
    if (!groups.length) {
      replace(panel, head, h("div", { dataset: { testid: "insight-empty" } }, emptyState(t("insight.unanswered_empty"))));
      return;
    }
    replace(
      panel,
      head,
      h(
        "ol",
        { class: "ins-groups", "aria-labelledby": "ins-unanswered-title", dataset: { testid: "insight-groups" } },
        groups.map((g, i) => groupItem(g, i, days, into, Number(d.days) || state.days)),
      ),
    );
  }

  function groupItem(g, i, days, into, windowLen) {
    const text = typeof g.question === "string" && g.question.trim() ? g.question : null;
    const id = `ins-g${i}`;
    const perDay = new Map((g.days || []).map((x) => [x.day, Number(x.count) || 0]));
    const lastMs = Date.parse(g.last_at);
    const result = h("div", { class: "ins-result", id: `${id}-result`, "aria-live": "polite", dataset: { testid: "insight-result" } });
    const error = h("p", { class: "form-error ins-error", role: "alert", dataset: { testid: "insight-group-error" } });
    const status = h("div", { class: "ins-status", dataset: { testid: "insight-group-status" } });
    const done = state.done.get(g.wording) || {};
    const drawDone = () => {
      replace(
        status,
        done.note
          ? h(
              "p",
              { class: "ins-done", dataset: { testid: "insight-note-done" } },
              h("span", { class: "badge badge-ok" }, t("insight.note_saved")),
              " ",
              h("a", { href: `#/kb/${encodeURIComponent(done.note.kb.id)}?doc=${encodeURIComponent(done.note.id)}` }, t("insight.open_note", { name: done.note.kb.name })),
            )
          : null,
        done.page
          ? h(
              "p",
              { class: "ins-done", dataset: { testid: "insight-page-done" } },
              h("span", { class: "badge badge-info" }, t("insight.page_requested")),
              " ",
              h("a", { href: `#/kb/${encodeURIComponent(done.page.kb.id)}/wiki/${encodeURIComponent(done.page.slug)}` }, t("insight.open_page", { slug: done.page.slug })),
            )
          : null,
      );
    };
    drawDone();

    // Actions: text and a knowledge base as each needs.
    const hints = [];
    if (!text) hints.push(h("span", { id: `${id}-hint-text` }, t("insight.needs_text")));
    if (!into) hints.push(h("span", { id: `${id}-hint-kb` }, t("insight.needs_kb")));
    const describe = (needsText, needsKb) =>
      [needsText && !text ? `${id}-hint-text` : null, needsKb && !into ? `${id}-hint-kb` : null].filter(Boolean).join(" ") || null;
    const btn = (key, label, needsText, needsKb, onclick, iconName) =>
      h(
        "button",
        {
          class: "btn btn-small",
          type: "button",
          disabled: (needsText && !text) || (needsKb && !into),
          "aria-describedby": describe(needsText, needsKb),
          dataset: { testid: `insight-${key}` },
          onclick,
        },
        iconName ? icon(iconName) : null,
        label,
      );
    const closest = btn("closest", t("insight.closest"), true, false, () => findClosest(), "search");
    const note = btn("note", t("insight.write_note"), true, true, () => writeNote(), "edit");
    const page = btn("page", t("insight.request_page"), true, true, () => requestPage(), "doc");
    // The Sources tab with its Add source dialog open, for this question.
    const source = into
      ? h(
          "a",
          {
            class: "btn btn-small",
            href: `#/kb/${encodeURIComponent(into.id)}/sources?add=1${text ? `&question=${encodeURIComponent(text)}` : ""}`,
            dataset: { testid: "insight-source" },
          },
          icon("plus"),
          t("insight.add_source"),
        )
      : btn("source", t("insight.add_source"), false, true, null, "plus");

    async function findClosest() {
      error.textContent = "";
      closest.disabled = true;
      result.setAttribute("aria-busy", "true");
      replace(result, h("p", { class: "muted" }, t("insight.searching")));
      try {
        const body = { question: text, min_score: 0, top_k: 1 };
        if (state.kb) body.knowledge_base_ids = [state.kb];
        // Not counted as a question asked: the owner checking one must not raise its count.
        const out = await api("POST", SEARCH, { body, signal, headers: { "X-Quarry-Insight": "off" } });
        const hit = (out?.results || [])[0];
        if (!hit) {
          replace(result, h("p", { class: "ins-closest ins-closest-none", dataset: { testid: "insight-closest-none" } }, t("insight.nothing_close")));
          announce(t("insight.nothing_close"));
          return;
        }
        const file = hit.knowledge_filename || hit.file || hit.knowledge_id || "";
        const title = hit.knowledge_title || file;
        const kb = hit.knowledge_base ? kbById(hit.knowledge_base) : null;
        const href = kb && hit.knowledge_id ? `#/kb/${encodeURIComponent(kb.id)}?doc=${encodeURIComponent(hit.knowledge_id)}${hit.page ? `&page=${hit.page}` : ""}` : null;
        const excerpt = String(hit.content || "").replace(/\s+/g, " ").trim();
        replace(
          result,
          h(
            "div",
            { class: "ins-closest", dataset: { testid: "insight-passage", score: String(hit.score) } },
            h(
              "p",
              { class: "ins-closest-head" },
              h("span", { class: "badge badge-info" }, t("insight.score_is", { score: score(hit.score) })),
              " ",
              href ? h("a", { href }, title) : h("span", {}, title),
              hit.heading && hit.heading !== title ? h("span", { class: "muted" }, ` › ${hit.heading}`) : null,
            ),
            h("p", { class: "ins-excerpt" }, excerpt.length > 320 ? `${excerpt.slice(0, 319)}…` : excerpt),
          ),
        );
        announce(t("insight.closest_found", { title, score: score(hit.score) }));
      } catch (e) {
        if (isAbort(e)) return;
        replace(result);
        error.textContent = e.message;
      } finally {
        closest.disabled = false;
        result.removeAttribute("aria-busy");
      }
    }

    function writeNote() {
      const kb = target();
      if (!kb || !text) return;
      error.textContent = "";
      const titleIn = h("input", { id: `${id}-note-title`, name: "title", required: true, maxlength: "200", value: text });
      const variants = (g.variants || []).filter((v) => v && v !== text);
      const prefill = `# ${text}\n\n\n${variants.length ? `\n${t("insight.note_also_asked", { list: variants.join("; ") })}\n` : ""}`;
      const bodyIn = h("textarea", { id: `${id}-note-body`, name: "content", rows: "10", required: true, "aria-describedby": `${id}-note-hint` });
      bodyIn.value = prefill;
      const formError = h("p", { class: "form-error", role: "alert", dataset: { testid: "insight-note-error" } });
      const save = h("button", { class: "btn btn-primary", type: "submit", form: `${id}-note-form` }, t("insight.save_note"));
      const d = openDialog({ title: t("insight.note_title", { name: kb.name }), wide: true, onClose: () => note.focus() });
      d.dialog.dataset.testid = "insight-note-dialog";
      const form = h(
        "form",
        { id: `${id}-note-form`, novalidate: true },
        h("p", { class: "muted" }, t("insight.note_intro", { name: kb.name })),
        h("div", { class: "field" }, h("label", { for: titleIn.id }, t("insight.note_field_title")), titleIn),
        h(
          "div",
          { class: "field" },
          h("label", { for: bodyIn.id }, t("insight.note_field_body")),
          bodyIn,
          h("span", { class: "hint", id: `${id}-note-hint` }, t("insight.note_hint")),
        ),
        formError,
      );
      d.body.append(form);
      d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), save);
      // The cursor where the answer goes: after the heading.
      bodyIn.focus();
      const at = `# ${text}\n\n`.length;
      bodyIn.setSelectionRange(at, at);
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        formError.textContent = "";
        const title = titleIn.value.trim();
        const content = bodyIn.value.trim();
        const answer = content.replace(/^#[^\n]*\n?/, "").trim();
        if (!title) {
          formError.textContent = t("insight.note_title_required");
          titleIn.focus();
          return;
        }
        if (!answer) {
          formError.textContent = t("insight.note_body_required");
          bodyIn.focus();
          return;
        }
        save.disabled = true;
        try {
          const created = await createNote(kb, title, content);
          done.note = { id: created.id, kb };
          state.done.set(g.wording, done);
          drawDone();
          d.close();
          toast(t("insight.note_saved_in", { name: kb.name }), "success");
          announce(t("insight.note_saved_in", { name: kb.name }));
        } catch (err) {
          if (isAbort(err)) return;
          formError.textContent = err.message;
        } finally {
          save.disabled = false;
        }
      });
    }

    async function requestPage() {
      const kb = target();
      if (!kb || !text) return;
      error.textContent = "";
      page.disabled = true;
      const slug = slugFor(text, g.wording);
      const variants = (g.variants || []).filter((v) => v && v !== text);
      const lines = [
        t("insight.page_body", { n: g.count, days: windowLen, last: (g.last_at || "").slice(0, 10) }),
        variants.length ? `\n${t("insight.note_also_asked", { list: variants.join("; ") })}` : "",
      ];
      try {
        await api("PUT", `${KB_BASE}/${encodeURIComponent(kb.id)}/pages/${encodeURIComponent(slug)}`, {
          body: { title: text, body: lines.join("\n").trim(), status: "draft", tags: ["requested"] },
          signal,
        });
        done.page = { slug, kb };
        state.done.set(g.wording, done);
        drawDone();
        announce(t("insight.page_requested_in", { slug, name: kb.name }));
        toast(t("insight.page_requested_in", { slug, name: kb.name }), "success");
      } catch (e) {
        if (isAbort(e)) return;
        // The API's own words (a 409 when the page exists, a 400 for a bad slug or title).
        error.textContent = e.message;
        announce(e.message, { assertive: true });
      } finally {
        page.disabled = !target() || !text;
      }
    }

    const counts = days.map((day) => perDay.get(day) || 0);
    return h(
      "li",
      { class: "card ins-group", dataset: { testid: "insight-group", wording: g.wording || "", count: String(g.count ?? "") } },
      h(
        "div",
        { class: "ins-group-head" },
        h(
          "h3",
          { class: "ins-question", dataset: { testid: "insight-question" } },
          text ? text : h("span", { class: "muted ins-no-text" }, t("insight.text_not_kept")),
        ),
        h("span", { class: "badge badge-warn ins-count", dataset: { testid: "insight-count" } }, tn("insight.asked_n", { n: fmtNumber(g.count) })),
      ),
      h(
        "div",
        { class: "ins-group-meta" },
        h(
          "span",
          {},
          t("insight.last_asked"),
          " ",
          Number.isNaN(lastMs) ? "—" : h("time", { datetime: new Date(lastMs).toISOString(), title: fmtDate(lastMs) }, relative(lastMs)),
        ),
        h("span", {}, g.best_score === null || g.best_score === undefined ? t("insight.no_passage") : t("insight.best_score", { score: score(g.best_score) })),
        sparkline(days, counts, g.count, lastMs),
      ),
      (g.variants || []).length
        ? h(
            "details",
            { class: "ins-variants", dataset: { testid: "insight-variants" } },
            h("summary", {}, tn("insight.variants", { n: g.variants.length })),
            h("ul", {}, g.variants.map((v) => h("li", {}, v))),
          )
        : null,
      h("div", { class: "ins-actions" }, closest, note, page, source),
      hints.length ? h("p", { class: "ins-hint" }, hints.map((x, k) => [k ? " " : null, x])) : null,
      error,
      status,
      result,
    );
  }

  /** Bars of counts per day over the window (decorative shapes; the label says it all). */
  function sparkline(days, counts, total, lastMs) {
    const w = 120;
    const hgt = 28;
    const max = Math.max(1, ...counts);
    const step = w / counts.length;
    const bar = Math.max(1, step - (counts.length > 40 ? 0.5 : 1));
    const label = tn("insight.spark_label", {
      n: total,
      days: counts.length,
      last: Number.isNaN(lastMs) ? "—" : fmtDate(lastMs),
    });
    return svg(
      "svg",
      { class: "ins-spark", viewBox: `0 0 ${w} ${hgt}`, width: w, height: hgt, role: "img", "aria-label": label, "data-testid": "insight-spark" },
      svg("title", {}, label),
      svg("line", { x1: 0, y1: hgt - 0.5, x2: w, y2: hgt - 0.5, class: "ins-spark-base" }),
      counts.map((c, i) =>
        c ? svg("rect", { x: (i * step).toFixed(2), y: (hgt - 1 - (c / max) * (hgt - 3)).toFixed(2), width: bar.toFixed(2), height: ((c / max) * (hgt - 3)).toFixed(2), class: "ins-spark-bar" }) : null,
      ),
    );
  }

  // ---- Monthly model tokens (in the Usage tab)
  // Built once: the usage redraws move the same section (what is typed in it stays).
  const budgetInput = h("input", {
    id: "ins-budget-tokens",
    name: "monthly_model_tokens",
    type: "number",
    min: "1",
    step: "1",
    inputmode: "numeric",
    autocomplete: "off",
    "aria-describedby": "ins-budget-tokens-hint ins-budget-error",
    dataset: { testid: "insight-budget-input" },
    oninput: () => {
      if (budgetInput.getAttribute("aria-invalid")) {
        budgetInput.removeAttribute("aria-invalid");
        budgetError.textContent = "";
      }
    },
  });
  const budgetHint = h("span", { class: "hint", id: "ins-budget-tokens-hint" });
  const budgetError = h("p", { class: "form-error ins-error", id: "ins-budget-error", role: "alert", dataset: { testid: "insight-budget-error" } });
  const budgetSave = h("button", { class: "btn btn-primary", type: "submit", dataset: { testid: "insight-budget-save" } }, t("insight.budget_save"));
  const budgetRemove = h(
    "button",
    { class: "btn", type: "button", dataset: { testid: "insight-budget-remove" }, onclick: () => saveBudget(null) },
    t("insight.budget_remove"),
  );
  const budgetForm = h(
    "form",
    {
      class: "ins-budget-form",
      novalidate: true,
      dataset: { testid: "insight-budget-form" },
      onsubmit: (e) => {
        e.preventDefault();
        const n = budgetValue();
        if (n !== null) saveBudget(n);
      },
    },
    h("div", { class: "field" }, h("label", { for: budgetInput.id }, t("insight.budget_field")), budgetInput, budgetHint),
    h("div", { class: "row" }, budgetSave, budgetRemove),
    budgetError,
  );
  const budgetBody = h("div", { class: "ins-budget-body", dataset: { testid: "insight-budget-status" } });
  const budgetSection = h(
    "section",
    { class: "card ins-budget", "aria-labelledby": "ins-budget-title", dataset: { testid: "insight-budget" } },
    h("h3", { id: "ins-budget-title" }, t("insight.budget_title")),
    budgetBody,
    budgetForm,
  );

  /** The owner's figure in the field (after a load or a save, never after an error). */
  function fillBudgetInput() {
    const own = state.budget?.data?.monthly_model_tokens;
    budgetInput.value = own === null || own === undefined ? "" : String(own);
    budgetInput.removeAttribute("aria-invalid");
    budgetError.textContent = "";
  }

  /** The whole number ≥ 1 typed, or null after saying what is wrong beside the field. */
  function budgetValue() {
    const raw = budgetInput.value.trim();
    const n = Number(raw);
    const problem = budgetInput.validity.badInput || !/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1
      ? raw || budgetInput.validity.badInput
        ? t("insight.budget_whole")
        : t("insight.budget_empty")
      : null;
    if (!problem) return n;
    budgetError.textContent = problem;
    budgetInput.setAttribute("aria-invalid", "true");
    budgetInput.focus();
    return null;
  }

  let budgetBusy = false;
  async function saveBudget(n) {
    if (budgetBusy) return;
    budgetBusy = true;
    budgetError.textContent = "";
    budgetInput.removeAttribute("aria-invalid");
    budgetSave.disabled = true;
    budgetRemove.disabled = true;
    budgetSection.setAttribute("aria-busy", "true");
    try {
      const data = await api("PUT", BUDGET, { body: { monthly_model_tokens: n }, signal });
      loads.budget?.abort(); // a load still under way would bring back the old figure
      state.budget = { data };
      fillBudgetInput();
      drawBudget();
      announce(n === null ? t("insight.budget_removed") : t("insight.budget_saved", { n: fmtNumber(n) }));
    } catch (e) {
      if (signal.aborted || isAbort(e)) return;
      // The API's own words (403 for anyone but the owners, 400 for a bad figure); what was
      // typed stays.
      budgetError.textContent = e.message;
      if (e.status === 400 && n !== null) budgetInput.setAttribute("aria-invalid", "true");
    } finally {
      budgetBusy = false;
      budgetSection.removeAttribute("aria-busy");
      budgetSave.disabled = false;
      budgetRemove.disabled = !hasOwnBudget();
    }
  }

  const hasOwnBudget = () => {
    const own = state.budget?.data?.monthly_model_tokens;
    return own !== null && own !== undefined;
  };

  function drawBudget() {
    const b = state.budget;
    const d = b?.data;
    budgetForm.hidden = !d;
    budgetRemove.disabled = budgetBusy || !hasOwnBudget();
    if (!d) {
      budgetSection.removeAttribute("data-limit");
      if (b?.error) {
        budgetSection.removeAttribute("aria-busy");
        replace(budgetBody, h("div", { dataset: { testid: "insight-budget-load-error" } }, errorBlock(b.error, () => loadBudget())));
      } else {
        budgetSection.setAttribute("aria-busy", "true");
        replace(budgetBody, h("p", { class: "loading" }, t("common.loading")));
      }
      return;
    }
    if (b.loading) budgetSection.setAttribute("aria-busy", "true");
    else if (!budgetBusy) budgetSection.removeAttribute("aria-busy");
    const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
    const own = num(d.monthly_model_tokens);
    const server = num(d.server_limit);
    const limit = num(d.limit);
    const used = num(d.used) ?? 0;
    const month = /^\d{4}-\d{2}$/.test(d.month || "") ? fmtDay(`${d.month}-01`, { year: "numeric", month: "long" }) : d.month || "—";
    Object.assign(budgetSection.dataset, { limit: limit === null ? "" : String(limit), used: String(used), own: own === null ? "" : String(own) });

    // Which limit applies, in words.
    let source;
    if (limit === null) source = t("insight.budget_src_none");
    else if (own !== null && server !== null && own > server) source = t("insight.budget_src_above", { own: fmtNumber(own), server: fmtNumber(server) });
    else if (own !== null && server !== null) source = t("insight.budget_src_own_ceiling", { server: fmtNumber(server) });
    else if (own !== null) source = t("insight.budget_src_own");
    else source = t("insight.budget_src_server");
    budgetHint.textContent = server === null ? t("insight.budget_hint") : t("insight.budget_hint_ceiling", { server: fmtNumber(server) });

    if (limit === null) {
      replace(
        budgetBody,
        h("p", { class: "ins-budget-figures", dataset: { testid: "insight-budget-used" } }, t("insight.budget_used_only", { used: fmtNumber(used), month })),
        h("p", { class: "ins-budget-none" }, h("span", { class: "badge", dataset: { testid: "insight-budget-none" } }, t("insight.budget_none"))),
        h("p", { class: "muted ins-budget-source", dataset: { testid: "insight-budget-source" } }, source),
      );
      return;
    }
    const remaining = num(d.remaining) ?? Math.max(0, limit - used);
    const ratio = limit > 0 ? used / limit : 1;
    const pct = Math.round(ratio * 100);
    const level = ratio >= 1 ? "spent" : ratio >= 0.9 ? "high" : "ok";
    const figures = t("insight.budget_used_of", { used: fmtNumber(used), limit: fmtNumber(limit), month });
    const fill = h("span", { class: "ins-meter-fill" });
    fill.style.width = `${Math.min(100, Math.max(0, ratio * 100))}%`;
    // The month ends at midnight UTC: the day it resets on, as a UTC day (the moment, local,
    // in its tooltip).
    const resetMs = Date.parse(d.resets_at);
    const resetEl = Number.isNaN(resetMs)
      ? "—"
      : h("time", { datetime: new Date(resetMs).toISOString(), title: fmtDate(resetMs) }, fmtDay(new Date(resetMs).toISOString().slice(0, 10), { year: "numeric", month: "long", day: "numeric" }));
    replace(
      budgetBody,
      h("p", { class: "ins-budget-figures", id: "ins-budget-figures", dataset: { testid: "insight-budget-used" } }, figures),
      h(
        "div",
        {
          class: `ins-meter ins-meter-${level}`,
          role: "meter",
          "aria-labelledby": "ins-budget-title",
          "aria-describedby": "ins-budget-figures",
          "aria-valuemin": "0",
          "aria-valuemax": String(limit),
          "aria-valuenow": String(Math.min(used, limit)),
          "aria-valuetext": t("insight.budget_meter_text", { used: fmtNumber(used), limit: fmtNumber(limit), pct: fmtNumber(pct) }),
          dataset: { testid: "insight-budget-meter", level },
        },
        fill,
      ),
      h(
        "p",
        { class: "ins-budget-left" },
        h(
          "span",
          { class: `badge ${level === "spent" ? "badge-danger" : level === "high" ? "badge-warn" : "badge-ok"}`, dataset: { testid: "insight-budget-remaining" } },
          level === "spent" ? t("insight.budget_spent") : t("insight.budget_remaining", { n: fmtNumber(remaining) }),
        ),
        " ",
        h("span", { dataset: { testid: "insight-budget-resets" } }, withNode(t("insight.budget_resets", { date: "\u0000" }), resetEl)),
      ),
      h("p", { class: "muted ins-budget-source", dataset: { testid: "insight-budget-source" } }, source),
    );
  }
  drawBudget();

  // ---- Usage
  let resizeObs = null;
  function drawUsage() {
    const panel = usagePanel;
    if (!panel) return;
    const u = state.usage;
    if (!u || u.loading) {
      panel.setAttribute("aria-busy", "true");
      if (!panel.querySelector(".ins-chart")) replace(panel, h("p", { class: "loading" }, t("common.loading")));
      return;
    }
    panel.removeAttribute("aria-busy");
    if (u.error) {
      replace(panel, h("div", { dataset: { testid: "insight-error" } }, errorBlock(u.error, () => loadUsage())));
      return;
    }
    const d = u.data || {};
    // The budget section moves with the redraw: the field or button in use keeps the focus.
    const hadFocus = budgetSection.contains(document.activeElement) ? document.activeElement : null;
    const days = Array.isArray(d.days) ? d.days : [];
    const byMetric = new Map((d.metrics || []).map((m) => [m.metric, m]));
    const metrics = [...METRICS.filter((m) => byMetric.has(m)), ...[...byMetric.keys()].filter((m) => !METRICS.includes(m))];
    const label = (m) => (METRICS.includes(m) ? t(`insight.metric.${m}`) : m);

    // Totals
    const cards = h(
      "ul",
      { class: "ins-cards", "aria-label": t("insight.totals"), dataset: { testid: "insight-totals" } },
      metrics.map((m) => {
        const x = byMetric.get(m);
        const extra =
          m === "approval_decisions" && x.count
            ? h("span", { class: "ins-card-extra", dataset: { testid: "insight-avg-wait" } }, t("insight.avg_wait", { wait: fmtWait(x.total / x.count) }))
            : m === "model_tokens" && x.count
              ? h("span", { class: "ins-card-extra", dataset: { testid: "insight-model-tokens" } }, t("insight.tokens", { n: fmtNumber(x.total) }))
              : null;
        return h(
          "li",
          { class: "ins-card", dataset: { testid: `insight-total-${m}`, count: String(x.count) } },
          h("span", { class: "ins-card-label" }, label(m)),
          h("span", { class: "ins-card-value" }, fmtNumber(x.count)),
          extra,
        );
      }),
    );

    // Chart, legend and table
    const shown = new Set(CHARTED.filter((m) => byMetric.has(m)));
    const chartBox = h("div", { class: "ins-chart", dataset: { testid: "insight-chart" } });
    const legend = h(
      "fieldset",
      { class: "ins-legend" },
      h("legend", {}, t("insight.legend")),
      [...shown].map((m, i) => {
        const cb = h("input", {
          type: "checkbox",
          id: `ins-series-${m}`,
          checked: true,
          onchange: () => {
            if (cb.checked) shown.add(m);
            else shown.delete(m);
            drawChart();
          },
        });
        return h("label", { class: `ins-key ins-c${i + 1}`, for: cb.id, dataset: { metric: m } }, cb, h("span", { class: "ins-swatch", "aria-hidden": "true" }), label(m));
      }),
    );
    const order = [...shown];
    const seriesClass = (m) => `ins-c${order.indexOf(m) + 1}`;

    function drawChart() {
      const width = Math.max(280, Math.floor(chartBox.clientWidth || 640));
      const height = width < 480 ? 200 : 240;
      const pad = { l: 36, r: 10, t: 10, b: 34 };
      const series = order.filter((m) => shown.has(m)).map((m) => ({ m, values: (byMetric.get(m).per_day || []).map(Number) }));
      const max = Math.max(1, ...series.flatMap((s) => s.values));
      const ticks = niceTicks(max);
      const top = ticks[ticks.length - 1];
      const n = Math.max(1, days.length);
      const iw = width - pad.l - pad.r;
      const ih = height - pad.t - pad.b;
      const x = (i) => pad.l + (n === 1 ? iw / 2 : (i * iw) / (n - 1));
      const y = (v) => pad.t + ih - (v / top) * ih;
      const total = series.reduce((a, s) => a + s.values.reduce((p, q) => p + q, 0), 0);
      const labelText = t("insight.chart_label", {
        days: days.length,
        list: series.map((s) => `${label(s.m)} ${fmtNumber(s.values.reduce((p, q) => p + q, 0))}`).join(", ") || t("common.none"),
      });
      const every = Math.ceil(n / Math.max(2, Math.floor(iw / 70)));
      const chart = svg(
        "svg",
        { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": labelText, "aria-describedby": "ins-usage-table-caption", "data-total": total },
        svg("title", {}, labelText),
        // Y axis: gridlines and counts
        ticks.map((v) =>
          svg(
            "g",
            { class: "ins-tick" },
            svg("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), class: v ? "ins-grid" : "ins-axis" }),
            svg("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end" }, fmtNumber(v)),
          ),
        ),
        // X axis: days, as many labels as fit (the last day's too, when there is room)
        xLabels(n, every).map((i) =>
          svg("text", { x: x(i), y: height - pad.b + 16, "text-anchor": i === 0 && n > 1 ? "start" : i === n - 1 && n > 1 ? "end" : "middle", class: "ins-xlabel" }, fmtDay(days[i])),
        ),
        svg("text", { x: pad.l + iw / 2, y: height - 4, "text-anchor": "middle", class: "ins-axis-title" }, t("insight.axis_day")),
        svg("text", { x: 10, y: pad.t + ih / 2, "text-anchor": "middle", transform: `rotate(-90 10 ${pad.t + ih / 2})`, class: "ins-axis-title" }, t("insight.axis_count")),
        series.map((s) =>
          svg(
            "g",
            { class: `ins-series ${seriesClass(s.m)}`, "data-metric": s.m },
            svg("polyline", { points: s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" "), fill: "none" }),
            n <= 31 ? s.values.map((v, i) => (v ? svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 2.6 }) : null)) : null,
          ),
        ),
      );
      replace(chartBox, chart);
    }

    const tableMetrics = metrics;
    const table = h(
      "div",
      // Scrolls on its own: reachable by keyboard, named by its caption.
      { class: "table-wrap ins-table-wrap", tabindex: "0", role: "region", "aria-labelledby": "ins-usage-table-caption" },
      h(
        "table",
        { class: "ins-table", dataset: { testid: "insight-usage-table" } },
        h("caption", { id: "ins-usage-table-caption" }, t("insight.table_caption", { days: days.length })),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, t("insight.col.day")), tableMetrics.map((m) => h("th", { scope: "col" }, label(m))))),
        h(
          "tbody",
          {},
          days
            .map((day, i) =>
              h(
                "tr",
                { dataset: { day } },
                h("th", { scope: "row" }, fmtDay(day, { year: "numeric", month: "short", day: "numeric" })),
                tableMetrics.map((m) => h("td", { dataset: { metric: m } }, fmtNumber((byMetric.get(m).per_day || [])[i] || 0))),
              ),
            )
            .reverse(),
        ),
      ),
    );

    // Subjects: tools by calls, search surfaces by searches, failing tools.
    const subjects = Array.isArray(d.subjects) ? d.subjects : [];
    const top = (metric, title, col) => {
      const rows = subjects.filter((s) => s.metric === metric).sort((a, b) => b.count - a.count || String(a.subject).localeCompare(String(b.subject))).slice(0, 10);
      return h(
        "section",
        { class: "ins-subjects", dataset: { testid: `insight-subjects-${metric}` } },
        h("h3", {}, title),
        rows.length
          ? h(
              "table",
              { class: "ins-mini" },
              h("caption", { class: "sr-only" }, title),
              h("thead", {}, h("tr", {}, h("th", { scope: "col" }, col), h("th", { scope: "col", class: "num" }, label(metric)))),
              h("tbody", {}, rows.map((r) => h("tr", {}, h("td", {}, h("code", {}, r.subject)), h("td", { class: "num" }, fmtNumber(r.count))))),
            )
          : h("p", { class: "muted" }, t("insight.none_yet")),
      );
    };

    // People and tokens
    const people = Array.isArray(d.people) ? d.people : [];
    const sum = (p) => Object.values(p.counts || {}).reduce((a, b) => a + Number(b || 0), 0);
    const peopleMetrics = metrics.filter((m) => people.some((p) => Number(p.counts?.[m] || 0) > 0));
    // Model tokens per person and token: what chat cost on their behalf.
    const spentTokens = people.some((p) => Number(p.totals?.model_tokens || 0) > 0);
    const peopleTable = people.length
      ? h(
          "div",
          { class: "table-wrap", tabindex: "0", role: "region", "aria-labelledby": "ins-people-title" },
          h(
            "table",
            { class: "ins-table", dataset: { testid: "insight-people" } },
            h("caption", { class: "sr-only" }, t("insight.people")),
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                h("th", { scope: "col" }, t("insight.col.person")),
                h("th", { scope: "col" }, t("insight.col.token")),
                peopleMetrics.map((m) => h("th", { scope: "col", class: "num" }, label(m))),
                spentTokens ? h("th", { scope: "col", class: "num" }, t("insight.col.model_tokens")) : null,
              ),
            ),
            h(
              "tbody",
              {},
              [...people]
                .sort((a, b) => sum(b) - sum(a))
                .map((p) =>
                  h(
                    "tr",
                    { dataset: { user: p.user || "" } },
                    h("th", { scope: "row" }, p.user || t("insight.unknown")),
                    h("td", {}, p.token ? p.token : p.token_id ? h("code", { title: p.token_id }, String(p.token_id).slice(0, 8)) : "—"),
                    peopleMetrics.map((m) => h("td", { class: "num" }, fmtNumber(p.counts?.[m] || 0))),
                    spentTokens ? h("td", { class: "num" }, fmtNumber(p.totals?.model_tokens || 0)) : null,
                  ),
                ),
            ),
          ),
        )
      : h("p", { class: "muted" }, t("insight.none_yet"));

    // CSV: a plain link (a cookie session downloads it as is) that the page fetches itself
    // with the API's headers (a header-authenticated session, the space), saved as a Blob.
    const csvQuery = new URLSearchParams({ days: String(state.days), format: "csv" });
    if (app.space) csvQuery.set("space_id", app.space);
    const csvName = `quarry-usage-${state.days}d.csv`;
    const csvError = h("p", { class: "form-error ins-error", role: "alert", dataset: { testid: "insight-csv-error" } });
    const csv = h(
      "a",
      {
        class: "btn",
        href: `${USAGE}?${csvQuery}`,
        download: csvName,
        dataset: { testid: "insight-csv" },
        onclick: async (e) => {
          e.preventDefault();
          csvError.textContent = "";
          try {
            const r = await fetch(`${USAGE}?${new URLSearchParams({ days: String(state.days), format: "csv" })}`, {
              credentials: "same-origin",
              headers: apiHeaders({ Accept: "text/csv" }),
              signal,
            });
            if (!r.ok) {
              let message = `HTTP ${r.status}`;
              try {
                const body = await r.json();
                message = serverText(body.detail || body.message || message);
              } catch {
                /* not JSON */
              }
              throw new ApiError(r.status, message);
            }
            const blob = await r.blob();
            const url = URL.createObjectURL(blob);
            const a = h("a", { href: url, download: csvName, hidden: true });
            document.body.append(a);
            a.click();
            a.remove();
            setTimeout(() => URL.revokeObjectURL(url), 10_000);
            announce(t("insight.csv_saved", { name: csvName }));
          } catch (err) {
            if (isAbort(err)) return;
            csvError.textContent = err.message;
          }
        },
      },
      downloadIcon(),
      t("insight.csv"),
    );

    replace(
      panel,
      h(
        "div",
        { class: "ins-section-head ins-usage-head" },
        h("h2", {}, t("insight.usage_title")),
        h("p", { class: "muted" }, t("insight.usage_summary", { days: days.length, from: days.length ? fmtDay(days[0]) : "—", to: days.length ? fmtDay(days[days.length - 1]) : "—" })),
        h("div", { class: "row" }, csv),
        csvError,
      ),
      cards,
      budgetSection,
      h(
        "section",
        { class: "card ins-chart-card", "aria-labelledby": "ins-chart-title" },
        h("h3", { id: "ins-chart-title" }, t("insight.chart_title")),
        legend,
        chartBox,
        h("details", { class: "ins-numbers", dataset: { testid: "insight-numbers" } }, h("summary", {}, t("insight.numbers")), table),
      ),
      h(
        "div",
        { class: "ins-two" },
        h("section", { class: "card" }, top("tool_calls", t("insight.top_tools"), t("insight.col.tool"))),
        h("section", { class: "card" }, top("searches", t("insight.top_surfaces"), t("insight.col.surface"))),
        subjects.some((s) => s.metric === "tool_failures") ? h("section", { class: "card" }, top("tool_failures", t("insight.top_failures"), t("insight.col.tool"))) : null,
      ),
      // Not a landmark itself: its scrolling table is the region, named by this heading.
      h("div", { class: "ins-people" }, h("h3", { id: "ins-people-title" }, t("insight.people")), peopleTable),
    );
    if (hadFocus) hadFocus.focus();
    drawChart();
    resizeObs?.disconnect();
    let lastWidth = chartBox.clientWidth;
    resizeObs = new ResizeObserver(() => {
      if (!chartBox.isConnected) return resizeObs.disconnect();
      if (Math.abs(chartBox.clientWidth - lastWidth) < 8) return;
      lastWidth = chartBox.clientWidth;
      drawChart();
    });
    resizeObs.observe(chartBox);
  }
  signal.addEventListener("abort", () => resizeObs?.disconnect(), { once: true });

  tabSet.select(firstTab);
  await load();
  if (signal.aborted) return;
  root.dataset.ready = "true";
}

/** The indices of the days labelled on the x axis: every `every`th, and the last one when it
 * is far enough from the one before. */
function xLabels(n, every) {
  const out = [];
  for (let i = 0; i < n; i += every) out.push(i);
  const last = out[out.length - 1];
  if (n > 1 && last !== n - 1) {
    if (n - 1 - last >= every * 0.6) out.push(n - 1);
    else out[out.length - 1] = n - 1;
  }
  return out;
}

/** Gridline values from 0 to a round number at or above `max` (4 or 5 steps). */
function niceTicks(max) {
  const rough = max / 4;
  const mag = 10 ** Math.floor(Math.log10(Math.max(rough, 1)));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= rough) || 10 * mag;
  const top = Math.max(step, Math.ceil(max / step) * step);
  const out = [];
  for (let v = 0; v <= top + 1e-9; v += step) out.push(Math.round(v));
  return out;
}

/** `create_knowledge` in `kb` as the viewer, through QukaAI's capture endpoint (JSON-RPC,
 * stateless): the note's id, or ApiError with the tool's own words. */
async function createNote(kb, title, content) {
  const out = await api("POST", MCP, {
    query: { resource: kb.name },
    body: {
      jsonrpc: "2.0",
      id: Date.now(),
      method: "tools/call",
      params: { name: "create_knowledge", arguments: { title, content, tags: ["insight"] } },
    },
  });
  if (out?.error) throw new ApiError(400, serverText(out.error.message || JSON.stringify(out.error)));
  const r = out?.result;
  if (!r || r.isError) {
    const text = (r?.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
    throw new ApiError(400, serverText(text) || t("insight.note_failed"));
  }
  const id = r.structuredContent?.id;
  if (!id) throw new ApiError(500, t("insight.note_failed"));
  return { id, structured: r.structuredContent };
}
