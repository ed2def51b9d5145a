// The wiki of a knowledge base (issue 68 item 8), loaded by kb.js on first use:
// - `#/kb/<id>/wiki` the index: the pages (type and tag filters, kept in the address; more
//   pages with the API's `next`), each with its status and a stale badge, and the lint's
//   findings (kind, page, detail);
// - `#/kb/<id>/wiki/<slug>` one page: its Markdown (`[[slug]]` links lead to the linked page),
//   status, a stale notice with each changed or deleted passage (its text when cited and now),
//   its sources with their state, text now and a link that opens the cited document in the
//   knowledge base's preview drawer at its page and lines, links and backlinks; writers edit
//   it in place (a PUT with `base_version`; a conflict shows the API's words and keeps what
//   was typed);
// - `#/kb/<id>/wiki/<slug>/history` its versions, newest first, and a line diff between the
//   chosen version (`?v=<version>`) and the one before it.
// Every text of a page is put in the DOM as text (js/markdown.js builds nodes, never HTML).

import { ApiError, announce, api, errorBlock, fmtDate, fmtNumber, h, icon, navigate, replace, t, toast } from "./app.js";
import { renderMarkdown } from "./markdown.js";

const KB_BASE = "/api/v1/knowledge-bases";
/** The page types Quarry names (quarry-engine's PAGE_TYPES); another lower-case word is fine too. */
const TYPES = ["summary", "entity", "concept", "comparison", "how-to", "index", "log"];
const STATUSES = ["draft", "published", "archived"];
const STATES = ["current", "moved", "changed", "deleted"];
const LINT_KINDS = ["stale", "broken_link", "no_sources", "orphan", "duplicate_title"];
/** A slug as the engine's check_slug takes it. */
const SLUG = /^[a-z0-9][a-z0-9-]{0,99}$/;
/** `[[slug]]` and `[[slug|label]]` (quarry-engine's page_links). */
const WIKI_LINK = /\[\[([^[\]|]*)(?:\|([^[\]]*))?\]\]/g;
const PAGE_SIZE = 50;
/** Unchanged lines shown around a change in a diff. */
const CONTEXT = 3;

/** `t()` with `<key>_one` or `<key>_other`, chosen by `vars.n`. */
const tn = (key, vars) => t(`${key}_${Number(vars.n) === 1 ? "one" : "other"}`, vars);
const known = (list, value, prefix) => (list.includes(value) ? t(`${prefix}.${value}`) : String(value ?? "—"));

/** Whether the session may write (kb.js's rule: not read-only, at least write access). */
function canWrite(session) {
  const level = ["read", "write", "admin"].indexOf(session?.access ?? "admin");
  return !session?.read_only && level >= 1;
}

const wikiHref = (kb, slug, sub) => `#/kb/${encodeURIComponent(kb.id)}/wiki${slug ? `/${encodeURIComponent(slug)}` : ""}${sub ? `/${sub}` : ""}`;
const pageUrl = (kb, slug) => `${KB_BASE}/${encodeURIComponent(kb.id)}/pages/${encodeURIComponent(slug)}`;

export async function wikiPage(ctx) {
  const { root, params, signal } = ctx;
  const key = params[0];
  const slug = params[2] || "";
  replace(root, h("p", { class: "loading" }, t("common.loading")));
  let kb;
  try {
    const all = await api("GET", KB_BASE, { signal });
    kb = all.find((k) => k.id === key) || all.find((k) => k.name === key);
    if (!kb) throw new ApiError(404, t("kb.not_found", { id: key }));
  } catch (e) {
    if (signal.aborted || e.name === "AbortError") return;
    replace(root, crumbs(null, key), h("div", { class: "page-head" }, h("h1", {}, t("wiki.title"))), errorBlock(e, () => navigate(location.hash)));
    root.dataset.ready = "true";
    return;
  }
  if (!slug) return indexView(ctx, kb);
  if (params[3] === "history") return historyView(ctx, kb, slug);
  return pageView(ctx, kb, slug);
}

/** Knowledge bases / <kb> / Wiki [/ <page> [/ History]]: the last one is the current page. */
function crumbs(kb, key, ...rest) {
  const parts = [
    [t("kb.title"), "#/kb"],
    [kb ? kb.name : key, kb ? `#/kb/${encodeURIComponent(kb.id)}` : null],
    [t("wiki.title"), kb ? wikiHref(kb) : null],
    ...rest,
  ];
  const items = [];
  parts.forEach(([label, href], i) => {
    if (i) items.push(h("span", { "aria-hidden": "true" }, " / "));
    const last = i === parts.length - 1;
    items.push(last || !href ? h("span", last ? { "aria-current": "page" } : {}, label) : h("a", { href }, label));
  });
  return h("nav", { class: "kb-crumbs", "aria-label": t("kb.breadcrumb") }, items);
}

const statusBadge = (status) =>
  h("span", { class: `badge ${status === "published" ? "badge-ok" : status === "draft" ? "badge-info" : ""}`, dataset: { testid: "wiki-status", status } }, known(STATUSES, status, "wiki.status"));
const staleBadge = () => h("span", { class: "badge badge-warn wiki-stale", dataset: { testid: "wiki-stale" } }, t("wiki.stale"));
const typeBadge = (type) => h("span", { class: "badge", dataset: { testid: "wiki-type" } }, known(TYPES, type, "wiki.type"));

/** Who wrote a version: user (and client), and the surface it came through. */
function writer(by) {
  const who = [by?.user, by?.client].filter((x) => typeof x === "string" && x).join(" · ");
  const via = typeof by?.via === "string" ? by.via : "";
  if (!who) return t("wiki.unknown_writer");
  return via ? t("wiki.written_via", { who, via }) : who;
}

// --- The index ------------------------------------------------------------------------------

async function indexView({ root, query, signal }, kb) {
  document.title = `${t("wiki.title")} · ${kb.name} · Quarry`;
  const state = {
    type: query?.get("type") || "",
    tag: query?.get("tag") || "",
    limit: Math.min(200, Math.max(1, Number(query?.get("limit")) || PAGE_SIZE)),
  };
  const typeSelect = h(
    "select",
    { id: "wiki-filter-type", dataset: { testid: "wiki-filter-type" } },
    h("option", { value: "" }, t("wiki.filter.all_types")),
    TYPES.map((ty) => h("option", { value: ty }, t(`wiki.type.${ty}`))),
  );
  if (state.type && !TYPES.includes(state.type)) typeSelect.append(h("option", { value: state.type }, state.type));
  typeSelect.value = state.type;
  const tagInput = h("input", { id: "wiki-filter-tag", type: "search", autocomplete: "off", spellcheck: "false", value: state.tag, dataset: { testid: "wiki-filter-tag" } });
  const filters = h(
    "form",
    { class: "kb-toolbar wiki-toolbar", role: "search", "aria-label": t("wiki.filter.label") },
    h("div", { class: "kb-filter" }, h("label", { for: typeSelect.id }, t("wiki.filter.type")), typeSelect),
    h("div", { class: "kb-filter kb-filter-grow" }, h("label", { for: tagInput.id }, t("wiki.filter.tag")), tagInput),
    h("button", { class: "btn", type: "submit" }, icon("search"), t("wiki.filter.apply")),
  );
  const count = h("p", { class: "muted wiki-count", role: "status", dataset: { testid: "wiki-total" } });
  const list = h("ul", { class: "wiki-list", dataset: { testid: "wiki-pages" } });
  const more = h("button", { class: "btn", type: "button", hidden: true, dataset: { testid: "wiki-more" } }, t("wiki.more"));
  const pagesBox = h("div", { class: "wiki-pages", "aria-live": "polite", "aria-busy": "true" }, list, more);
  const lintBox = h("section", { class: "card wiki-lint", "aria-labelledby": "wiki-lint-title", dataset: { testid: "wiki-lint" } }, h("h2", { id: "wiki-lint-title" }, t("wiki.lint.title")), h("p", { class: "loading" }, t("common.loading")));

  replace(
    root,
    crumbs(kb, kb.name, [t("wiki.title"), null]),
    h("div", { class: "page-head" }, h("h1", {}, t("wiki.title"))),
    h("p", { class: "muted wiki-intro" }, t("wiki.intro", { name: kb.name })),
    filters,
    count,
    pagesBox,
    lintBox,
  );

  let next = null;
  async function load(after) {
    pagesBox.setAttribute("aria-busy", "true");
    more.disabled = true;
    try {
      const out = await api("GET", `${KB_BASE}/${encodeURIComponent(kb.id)}/pages`, {
        query: { type: state.type, tag: state.tag, after, limit: state.limit },
        signal,
      });
      const pages = out?.pages || [];
      if (!after) replace(list);
      list.append(...pages.map((p) => pageItem(kb, p)));
      next = out?.next || null;
      more.hidden = !next;
      const total = out?.total ?? pages.length;
      count.textContent = total ? tn("wiki.total", { n: fmtNumber(total), shown: fmtNumber(list.children.length) }) : "";
      if (!total) replace(list, h("li", { class: "empty", dataset: { testid: "wiki-empty" } }, state.type || state.tag ? t("wiki.empty_filtered") : t("wiki.empty")));
    } catch (e) {
      if (signal.aborted || e.name === "AbortError") return;
      replace(list, h("li", {}, errorBlock(e, () => load(after))));
    } finally {
      more.disabled = false;
      pagesBox.setAttribute("aria-busy", "false");
    }
  }
  more.addEventListener("click", () => next && load(next));
  filters.addEventListener("submit", (e) => {
    e.preventDefault();
    state.type = typeSelect.value;
    state.tag = tagInput.value.trim();
    const q = new URLSearchParams();
    if (state.type) q.set("type", state.type);
    if (state.tag) q.set("tag", state.tag);
    if (state.limit !== PAGE_SIZE) q.set("limit", String(state.limit));
    history.replaceState(null, "", `${wikiHref(kb)}${q.toString() ? `?${q}` : ""}`);
    load(null);
  });
  typeSelect.addEventListener("change", () => filters.requestSubmit());

  async function loadLint() {
    try {
      const out = await api("GET", `${KB_BASE}/${encodeURIComponent(kb.id)}/lint`, { signal });
      const findings = out?.findings || [];
      replace(
        lintBox,
        h("h2", { id: "wiki-lint-title" }, t("wiki.lint.title")),
        h("p", { class: "muted" }, findings.length ? tn("wiki.lint.count", { n: fmtNumber(findings.length) }) : t("wiki.lint.none")),
        findings.length
          ? h(
              "ul",
              { class: "wiki-findings" },
              findings.map((f) =>
                h(
                  "li",
                  { dataset: { testid: "wiki-finding", kind: f.kind, page: f.page } },
                  h("span", { class: `badge ${f.kind === "stale" || f.kind === "broken_link" ? "badge-warn" : ""}` }, known(LINT_KINDS, f.kind, "wiki.lint.kind")),
                  " ",
                  h("a", { href: wikiHref(kb, f.page), class: "wiki-slug" }, f.page),
                  h("p", { class: "wiki-finding-detail" }, f.detail || ""),
                ),
              ),
            )
          : null,
      );
    } catch (e) {
      if (signal.aborted || e.name === "AbortError") return;
      replace(lintBox, h("h2", { id: "wiki-lint-title" }, t("wiki.lint.title")), errorBlock(e, loadLint));
    }
  }

  await Promise.all([load(null), loadLint()]);
  if (!signal.aborted) root.dataset.ready = "true";
}

function pageItem(kb, p) {
  return h(
    "li",
    { class: "card wiki-item", dataset: { testid: "wiki-page", slug: p.slug, stale: String(!!p.stale) } },
    h(
      "div",
      { class: "wiki-item-head" },
      h("h2", {}, h("a", { href: wikiHref(kb, p.slug) }, p.title || p.slug)),
      typeBadge(p.type),
      statusBadge(p.status),
      p.stale ? staleBadge() : null,
    ),
    h("p", { class: "wiki-summary" }, p.summary || ""),
    h(
      "p",
      { class: "muted wiki-item-meta" },
      h("span", { class: "wiki-slug" }, p.slug),
      " · ",
      t("wiki.updated", { date: fmtDate(p.updated_at) }),
      (p.tags || []).length ? [" · ", tagList(p.tags)] : null,
    ),
  );
}

const tagList = (tags) => h("span", { class: "wiki-tags" }, (tags || []).map((tag) => h("span", { class: "wiki-tag" }, `#${tag}`)));

// --- One page -------------------------------------------------------------------------------

/** Replaces each `[[slug]]` in the text of `node` (outside code and links) by a link to that page. */
export function linkWikiPages(node, hrefOf) {
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => (n.parentElement?.closest("code, pre, a") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const texts = [];
  while (walker.nextNode()) if (walker.currentNode.nodeValue.includes("[[")) texts.push(walker.currentNode);
  for (const text of texts) {
    const value = text.nodeValue;
    const parts = [];
    let last = 0;
    for (const m of value.matchAll(WIKI_LINK)) {
      const slug = m[1].trim();
      if (!SLUG.test(slug)) continue;
      parts.push(value.slice(last, m.index));
      const label = (m[2] ?? "").trim() || slug;
      parts.push(h("a", { href: hrefOf(slug), class: "wiki-link", dataset: { testid: "wiki-link", slug } }, label));
      last = m.index + m[0].length;
    }
    if (!parts.length) continue;
    parts.push(value.slice(last));
    text.replaceWith(...parts.filter((p) => p !== ""));
  }
  return node;
}

/** Where a source's document opens: the knowledge base's preview drawer, at the page and lines. */
function sourceHref(kb, s) {
  const q = new URLSearchParams({ doc: s.document });
  if (s.page) q.set("page", String(s.page));
  const lines = s.moved_to || s.lines;
  if (lines?.[0]) q.set("line", String(lines[0]));
  q.set("tab", "chunks");
  return `#/kb/${encodeURIComponent(kb.id)}?${q}`;
}

const linesText = ([a, b] = []) => (a === b ? t("wiki.line", { n: a }) : t("wiki.lines", { from: a, to: b }));

async function pageView({ root, signal, session }, kb, slug) {
  const writable = canWrite(session);
  let page;
  try {
    page = await api("GET", pageUrl(kb, slug), { signal });
  } catch (e) {
    if (signal.aborted || e.name === "AbortError") return;
    replace(root, crumbs(kb, kb.name, [slug, null]), h("div", { class: "page-head" }, h("h1", {}, slug)), errorBlock(e, () => navigate(location.hash)));
    root.dataset.ready = "true";
    return;
  }
  const body = h("div", { class: "wiki-view" });
  const head = h("div", { class: "page-head" });
  const crumbBox = h("div");
  const editButton = writable
    ? h("button", { class: "btn", type: "button", dataset: { testid: "wiki-edit" }, onclick: () => edit() }, icon("edit"), t("common.edit"))
    : null;
  replace(root, crumbBox, head, body);

  function draw() {
    document.title = `${page.title} · ${t("wiki.title")} · Quarry`;
    replace(crumbBox, crumbs(kb, kb.name, [page.title || page.slug, null]));
    replace(
      head,
      h("h1", { dataset: { testid: "wiki-title" } }, page.title || page.slug),
      h(
        "div",
        { class: "page-actions" },
        h("a", { class: "btn", href: wikiHref(kb, page.slug, "history"), dataset: { testid: "wiki-history-link" } }, icon("refresh"), t("wiki.history")),
        editButton,
      ),
    );
    if (editButton) editButton.hidden = false;
    const stale = (page.sources || []).filter((s) => s.state === "changed" || s.state === "deleted");
    const article = h("article", { class: "card wiki-article md", dataset: { testid: "wiki-body" }, "aria-label": page.title || page.slug }, renderMarkdown(page.body || "", { headingOffset: 1 }));
    linkWikiPages(article, (s) => wikiHref(kb, s));
    replace(
      body,
      h(
        "p",
        { class: "wiki-meta", dataset: { testid: "wiki-meta" } },
        typeBadge(page.type),
        statusBadge(page.status),
        page.stale ? staleBadge() : h("span", { class: "badge badge-ok", dataset: { testid: "wiki-current" } }, t("wiki.up_to_date")),
        h("span", { class: "muted" }, t("wiki.version_by", { who: writer(page.written_by), date: fmtDate(page.updated_at) })),
        (page.tags || []).length ? tagList(page.tags) : null,
      ),
      page.stale ? staleNotice(stale) : null,
      article,
      sourcesSection(),
      linksSection(),
    );
  }

  function staleNotice(stale) {
    return h(
      "section",
      { class: "wiki-stale-box", role: "note", "aria-labelledby": "wiki-stale-title", dataset: { testid: "wiki-stale-reasons" } },
      h("h2", { id: "wiki-stale-title" }, t("wiki.stale_title")),
      h("p", {}, t("wiki.stale_intro")),
      h(
        "ul",
        { class: "wiki-reasons" },
        stale.map((s) =>
          h(
            "li",
            { dataset: { testid: "wiki-stale-reason", document: s.document } },
            h(
              "p",
              { class: "wiki-reason-head" },
              s.state === "deleted"
                ? t("wiki.reason_deleted", { lines: linesText(s.lines) })
                : t("wiki.reason_changed", { lines: linesText(s.lines), title: s.title || s.document }),
            ),
            passage(t("wiki.was"), s.was, "was"),
            s.state === "changed" ? passage(t("wiki.now"), s.text, "now") : null,
          ),
        ),
      ),
      h("p", { class: "muted" }, writable ? t("wiki.stale_fix") : t("wiki.stale_fix_ro")),
    );
  }

  function passage(label, text, kind) {
    return h(
      "div",
      { class: `wiki-passage wiki-passage-${kind}`, dataset: { testid: `wiki-${kind}` } },
      h("span", { class: "wiki-passage-label" }, label),
      kind === "was" ? h("del", {}, text || "") : kind === "now" ? h("ins", {}, text || "") : h("blockquote", {}, text || ""),
    );
  }

  function sourcesSection() {
    const sources = page.sources || [];
    return h(
      "section",
      { class: "card wiki-sources", "aria-labelledby": "wiki-sources-title", dataset: { testid: "wiki-sources" } },
      h("h2", { id: "wiki-sources-title" }, tn("wiki.sources", { n: sources.length })),
      sources.length
        ? h(
            "ol",
            {},
            sources.map((s) =>
              h(
                "li",
                { class: `wiki-source is-${s.state}`, dataset: { testid: "wiki-source", state: s.state, document: s.document } },
                h(
                  "div",
                  { class: "wiki-source-head" },
                  h("span", { class: `badge ${s.state === "current" ? "badge-ok" : s.state === "moved" ? "badge-info" : "badge-warn"}`, dataset: { testid: "wiki-source-state" } }, known(STATES, s.state, "wiki.state")),
                  s.state === "deleted"
                    ? h("span", {}, t("wiki.source_gone", { lines: linesText(s.lines) }))
                    : h(
                        "a",
                        { class: "kb-cite", href: sourceHref(kb, s), dataset: { testid: "wiki-source-open" } },
                        s.page ? t("wiki.cite_page", { title: s.title || s.document, lines: linesText(s.moved_to || s.lines), page: s.page }) : t("wiki.cite", { title: s.title || s.document, lines: linesText(s.moved_to || s.lines) }),
                      ),
                  s.state === "moved" ? h("span", { class: "muted" }, t("wiki.moved_from", { lines: linesText(s.lines) })) : null,
                ),
                s.state === "deleted" ? null : h("blockquote", { class: "wiki-source-text", dataset: { testid: "wiki-source-text" } }, s.text || ""),
                s.was && s.state !== "deleted" ? h("details", { class: "wiki-source-was" }, h("summary", {}, t("wiki.was_cited")), h("blockquote", {}, s.was)) : null,
                s.state === "deleted" && s.was ? h("details", { class: "wiki-source-was" }, h("summary", {}, t("wiki.was_cited")), h("blockquote", {}, s.was)) : null,
              ),
            ),
          )
        : h("p", { class: "muted" }, t("wiki.no_sources")),
    );
  }

  function linksSection() {
    const list = (items, testid, empty) =>
      items.length
        ? h("ul", { class: "wiki-linklist", dataset: { testid } }, items.map((s) => h("li", {}, h("a", { href: wikiHref(kb, s), class: "wiki-slug" }, s))))
        : h("p", { class: "muted", dataset: { testid } }, empty);
    return h(
      "section",
      { class: "card wiki-links", "aria-label": t("wiki.links_and_backlinks") },
      h("div", {}, h("h2", {}, t("wiki.links")), list(page.links || [], "wiki-links", t("wiki.no_links"))),
      h("div", {}, h("h2", {}, t("wiki.backlinks")), list(page.backlinks || [], "wiki-backlinks", t("wiki.no_backlinks"))),
    );
  }

  // --- Edit in place -----------------------------------------------------------------------
  function edit() {
    if (editButton) editButton.hidden = true;
    const field = (id, label, control, hint) => {
      control.id = `wiki-edit-${id}`;
      if (hint) control.setAttribute("aria-describedby", `${control.id}-hint`);
      return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hint ? h("span", { class: "hint", id: `${control.id}-hint` }, hint) : null);
    };
    const title = h("input", { type: "text", required: true, maxlength: "300", value: page.title || "" });
    const type = h("input", { type: "text", list: "wiki-types", autocomplete: "off", spellcheck: "false", value: page.type || "summary" });
    const types = h("datalist", { id: "wiki-types" }, TYPES.map((ty) => h("option", { value: ty })));
    const status = h("select", {}, STATUSES.map((s) => h("option", { value: s }, t(`wiki.status.${s}`))));
    status.value = page.status || "published";
    const tags = h("input", { type: "text", autocomplete: "off", value: (page.tags || []).join(", ") });
    const text = h("textarea", { rows: "14", class: "wiki-mono", spellcheck: "true", dataset: { testid: "wiki-edit-body" } });
    text.value = page.body || "";
    const sources = h("textarea", { rows: "4", class: "wiki-mono", spellcheck: "false", dataset: { testid: "wiki-edit-sources" } });
    sources.value = (page.sources || []).map((s) => `${s.document}:${s.lines[0]}-${s.lines[1]}`).join("\n");
    const error = h("p", { class: "form-error wiki-error", role: "alert", dataset: { testid: "wiki-edit-error" } });
    const save = h("button", { class: "btn btn-primary", type: "submit", dataset: { testid: "wiki-save" } }, t("common.save"));
    const cancel = h("button", { class: "btn", type: "button", dataset: { testid: "wiki-cancel" }, onclick: () => (draw(), editButton?.focus()) }, t("common.cancel"));
    title.dataset.testid = "wiki-edit-title";
    const form = h(
      "form",
      { class: "card wiki-form", novalidate: true, "aria-labelledby": "wiki-form-title", dataset: { testid: "wiki-form" } },
      h("h2", { id: "wiki-form-title" }, t("wiki.edit_title", { slug: page.slug })),
      field("title", t("wiki.f.title"), title),
      h("div", { class: "wiki-form-row" }, field("type", t("wiki.f.type"), type, t("wiki.f.type_hint")), types, field("status", t("wiki.f.status"), status), field("tags", t("wiki.f.tags"), tags, t("wiki.f.tags_hint"))),
      field("body", t("wiki.f.body"), text, t("wiki.f.body_hint")),
      field("sources", t("wiki.f.sources"), sources, t("wiki.f.sources_hint")),
      h("p", { class: "hint muted" }, t("wiki.f.base", { version: page.version })),
      error,
      h("div", { class: "row" }, save, cancel),
    );
    replace(body, form);
    title.focus();
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      error.textContent = "";
      if (!title.value.trim()) {
        error.textContent = t("wiki.f.title_required");
        title.focus();
        return;
      }
      const out = {
        title: title.value.trim(),
        type: type.value.trim() || "summary",
        status: status.value,
        tags: tags.value.split(",").map((x) => x.trim()).filter(Boolean),
        body: text.value,
        sources: sources.value.split("\n").map((x) => x.trim()).filter(Boolean),
        base_version: page.version,
      };
      save.disabled = true;
      try {
        page = await api("PUT", pageUrl(kb, page.slug), { body: out, signal });
        draw();
        toast(t("wiki.saved"), "success");
        announce(t("wiki.saved"));
        editButton?.focus();
      } catch (err) {
        if (signal.aborted || err.name === "AbortError") return;
        // The API's words; everything typed stays in the form.
        error.textContent = err.status === 409 ? t("wiki.conflict", { detail: err.message }) : err.message;
        error.dataset.status = String(err.status || "");
        announce(error.textContent, { assertive: true });
      } finally {
        save.disabled = false;
      }
    });
  }

  draw();
  root.dataset.ready = "true";
}

// --- History --------------------------------------------------------------------------------

/**
 * The line diff of `a` (null: nothing) and `b` (a longest common subsequence of lines): a list of
 * `{op: "same" | "del" | "add", text, a, b}` with 1-based line numbers in `a` and `b`.
 */
export function lineDiff(a, b) {
  // No earlier text (a page's first version): every line is added.
  const x = a === null || a === undefined ? [] : String(a).split("\n");
  const y = String(b ?? "").split("\n");
  let start = 0;
  while (start < x.length && start < y.length && x[start] === y[start]) start++;
  let ex = x.length;
  let ey = y.length;
  while (ex > start && ey > start && x[ex - 1] === y[ey - 1]) ex--, ey--;
  const out = [];
  for (let k = 0; k < start; k++) out.push({ op: "same", text: x[k], a: k + 1, b: k + 1 });
  const n = ex - start;
  const m = ey - start;
  if (n * m > 4_000_000) {
    // Too long to align: all of the middle removed, then all of it added.
    for (let i = start; i < ex; i++) out.push({ op: "del", text: x[i], a: i + 1 });
    for (let j = start; j < ey; j++) out.push({ op: "add", text: y[j], b: j + 1 });
  } else {
    // lcs[i][j]: the common subsequence's length of x[start+i..ex) and y[start+j..ey).
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i][j] = x[start + i] === y[start + j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[start + i] === y[start + j]) {
        out.push({ op: "same", text: x[start + i], a: start + i + 1, b: start + j + 1 });
        i++, j++;
      } else if (j >= m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1])) {
        out.push({ op: "del", text: x[start + i], a: start + i + 1 });
        i++;
      } else {
        out.push({ op: "add", text: y[start + j], b: start + j + 1 });
        j++;
      }
    }
  }
  for (let k = 0; k < x.length - ex; k++) out.push({ op: "same", text: x[ex + k], a: ex + k + 1, b: ey + k + 1 });
  return out;
}

/** The diff as a list, unchanged runs cut to CONTEXT lines around each change. */
function diffList(diff) {
  const changed = diff.map((d) => d.op !== "same");
  const keep = diff.map((_, i) => changed.slice(Math.max(0, i - CONTEXT), i + CONTEXT + 1).some(Boolean));
  const items = [];
  let skipped = 0;
  const flush = () => {
    if (skipped) items.push(h("li", { class: "wiki-diff-skip" }, tn("wiki.diff.skipped", { n: skipped })));
    skipped = 0;
  };
  diff.forEach((d, i) => {
    if (!keep[i]) return void skipped++;
    flush();
    const mark = d.op === "add" ? "+" : d.op === "del" ? "−" : " ";
    items.push(
      h(
        "li",
        { class: `wiki-diff-${d.op}`, dataset: { testid: `diff-${d.op}` } },
        h("span", { class: "wiki-diff-no", "aria-hidden": "true" }, d.a ?? ""),
        h("span", { class: "wiki-diff-no", "aria-hidden": "true" }, d.b ?? ""),
        h("span", { class: "wiki-diff-mark", "aria-hidden": "true" }, mark),
        d.op === "same" ? null : h("span", { class: "sr-only" }, `${t(`wiki.diff.${d.op}`)}: `),
        h(d.op === "add" ? "ins" : d.op === "del" ? "del" : "span", { class: "wiki-diff-text" }, d.text || " "),
      ),
    );
  });
  flush();
  return h("ol", { class: "wiki-diff", dataset: { testid: "wiki-diff" } }, items);
}

async function historyView({ root, query, signal }, kb, slug) {
  let versions;
  try {
    versions = (await api("GET", `${pageUrl(kb, slug)}/history`, { signal }))?.versions || [];
  } catch (e) {
    if (signal.aborted || e.name === "AbortError") return;
    replace(root, crumbs(kb, kb.name, [slug, wikiHref(kb, slug)], [t("wiki.history"), null]), h("div", { class: "page-head" }, h("h1", {}, t("wiki.history"))), errorBlock(e, () => navigate(location.hash)));
    root.dataset.ready = "true";
    return;
  }
  const title = versions[0]?.title || slug;
  document.title = `${t("wiki.history")} · ${title} · Quarry`;
  const list = h("ol", { class: "wiki-versions", dataset: { testid: "wiki-versions" } });
  const diffBox = h("section", { class: "card wiki-diff-box", "aria-labelledby": "wiki-diff-title", "aria-live": "polite", dataset: { testid: "wiki-diff-box" } });
  replace(
    root,
    crumbs(kb, kb.name, [title, wikiHref(kb, slug)], [t("wiki.history"), null]),
    h("div", { class: "page-head" }, h("h1", {}, t("wiki.history_of", { title })), h("div", { class: "page-actions" }, h("a", { class: "btn", href: wikiHref(kb, slug) }, t("wiki.back_to_page")))),
    h("p", { class: "muted" }, tn("wiki.n_versions", { n: versions.length })),
    h("div", { class: "wiki-history" }, list, diffBox),
  );
  const buttons = [];
  versions.forEach((v, i) => {
    const button = h(
      "button",
      { class: "btn btn-small", type: "button", "aria-pressed": "false", dataset: { testid: "wiki-version-show" }, onclick: () => select(i, true) },
      t("wiki.show_changes"),
      h("span", { class: "sr-only" }, ` ${t("wiki.version_n", { n: versions.length - i })}`),
    );
    buttons.push(button);
    list.append(
      h(
        "li",
        { class: "card wiki-version", dataset: { testid: "wiki-version", version: v.version, current: String(!!v.current) } },
        h(
          "div",
          { class: "wiki-version-head" },
          h("strong", {}, t("wiki.version_n", { n: versions.length - i })),
          v.current ? h("span", { class: "badge badge-info" }, t("wiki.current")) : null,
          statusBadge(v.status),
        ),
        h("p", { class: "muted" }, t("wiki.version_by", { who: writer(v.written_by), date: fmtDate(v.updated_at) })),
        h("p", { class: "wiki-version-title" }, v.title),
        button,
      ),
    );
  });

  function select(i, user) {
    const v = versions[i];
    const before = versions[i + 1] || null;
    buttons.forEach((b, k) => b.setAttribute("aria-pressed", String(k === i)));
    for (const [k, li] of [...list.children].entries()) li.classList.toggle("is-selected", k === i);
    if (user) history.replaceState(null, "", `${wikiHref(kb, slug, "history")}?v=${encodeURIComponent(v.version)}`);
    const fields = [];
    if (before) {
      const changed = (label, a, b) => a !== b && fields.push(h("li", { dataset: { testid: "wiki-field-change" } }, h("strong", {}, label), " ", h("del", {}, a || "—"), " → ", h("ins", {}, b || "—")));
      changed(t("wiki.f.title"), before.title, v.title);
      changed(t("wiki.f.type"), before.type, v.type);
      changed(t("wiki.f.status"), known(STATUSES, before.status, "wiki.status"), known(STATUSES, v.status, "wiki.status"));
      changed(t("wiki.f.tags"), (before.tags || []).join(", "), (v.tags || []).join(", "));
      changed(t("wiki.f.sources"), (before.sources || []).join(", "), (v.sources || []).join(", "));
    }
    const diff = lineDiff(before ? before.body : null, v.body);
    const added = diff.filter((d) => d.op === "add").length;
    const removed = diff.filter((d) => d.op === "del").length;
    replace(
      diffBox,
      h("h2", { id: "wiki-diff-title" }, before ? t("wiki.diff.title", { n: versions.length - i, m: versions.length - i - 1 }) : t("wiki.diff.first")),
      h("p", { class: "muted", dataset: { testid: "wiki-diff-summary" } }, t("wiki.diff.summary", { added, removed })),
      fields.length ? h("ul", { class: "wiki-field-changes" }, fields) : null,
      added || removed ? diffList(diff) : h("p", { class: "muted" }, t("wiki.diff.same_body")),
    );
    if (user) announce(t("wiki.diff.summary", { added, removed }));
  }

  const wanted = query?.get("v");
  const at = versions.findIndex((v) => v.version === wanted);
  if (versions.length) select(at >= 0 ? at : 0, false);
  root.dataset.ready = "true";
}
