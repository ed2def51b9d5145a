// Knowledge bases: `#/kb` lists them as cards (live document counts); `#/kb/<id>` is one
// knowledge base — uploads with per-file progress, the document table (filters, sorting,
// pages, retry/delete, bulk actions, live status), search with citations, and the preview
// drawer (original / Markdown / chunks, opened at a page). `#/kb/<id>?doc=<id>&page=N`
// opens the drawer directly. `#/kb/<id>/sources` opens its Sources tab (with `?add=1`, and
// `&question=` from the Insight page, its Add source dialog too) and
// `#/kb/<id>/sources/<source id>` a source's page (js/sources.js, loaded on first use), and
// `#/kb/<id>/test` the retrieval test page (js/retrieval.js, loaded on first use), and
// `#/kb/<id>/wiki[/<slug>[/history]]` its wiki (js/wiki.js, loaded on first use). Writers
// curate a document's chunks in the drawer: edit a chunk's text (and restore the cut text),
// disable or enable it, and re-chunk the document with another size and overlap.
// Everything shown comes from the server, so it survives a reload.

import {
  ApiError,
  announce,
  api,
  apiHeaders,
  app,
  confirmDialog,
  emptyState,
  errorBlock,
  fmtBytes,
  fmtDate,
  fmtNumber,
  h,
  icon,
  loadCss,
  loadStrings,
  navigate,
  openDialog,
  pageHeader,
  replace,
  serverText,
  t,
  tabs,
  toast,
  upload,
} from "./app.js";
import { renderMarkdown } from "./markdown.js";

const BASE = "/api/v1/knowledge-bases";
/** Seed 003: processing documents are refreshed every 3 seconds. */
const POLL_MS = 3000;
const PAGE_SIZES = [25, 50, 100];
const STATUSES = ["pending", "converting", "indexing", "embedding", "ready", "failed"];

/** An estimate of time left, no finer than it is: "40 s", "7 min", "2 h 5 min". */
function fmtEta(secs) {
  if (secs < 90) return t("kb.eta_s", { n: Math.max(1, Math.round(secs)) });
  if (secs < 5400) return t("kb.eta_min", { n: Math.ceil(secs / 60) });
  return t("kb.eta_h", { h: Math.floor(secs / 3600), min: Math.floor((secs % 3600) / 60) });
}
const ACTIVE = new Set(["pending", "converting", "indexing", "embedding"]);
/** Extensions the converters take (quarry-convert's Format::from_file_name). */
const SUPPORTED = ["pdf", "docx", "xlsx", "xlsm", "xls", "ods", "pptx", "csv", "tsv", "tab", "html", "htm", "xhtml", "txt", "text", "log", "md", "markdown", "mdx", "json"];
const UPLOAD_CONCURRENCY = 3;

export async function render(ctx) {
  if (ctx.params[0] && ctx.params[1] === "sources" && ctx.params[2]) return (await sourcesModule()).sourcePage(ctx);
  if (ctx.params[0] && ctx.params[1] === "test") return (await retrievalModule()).retrievalPage(ctx);
  if (ctx.params[0] && ctx.params[1] === "wiki") return (await wikiModule()).wikiPage(ctx);
  if (ctx.params[0]) return kbPage(ctx);
  return listPage(ctx);
}

/** js/sources.js with its strings and styles, loaded on first use (not on the first screen). */
function sourcesModule() {
  return Promise.all([import("./sources.js"), loadStrings("sources"), loadCss("sources")]).then(([m]) => m);
}

/** js/retrieval.js (the retrieval test page) with its strings and styles, loaded on first use. */
function retrievalModule() {
  return Promise.all([import("./retrieval.js"), loadStrings("retrieval"), loadCss("retrieval")]).then(([m]) => m);
}

/** js/wiki.js (the wiki: index, pages, history, editing) with its strings and styles, loaded on first use. */
function wikiModule() {
  return Promise.all([import("./wiki.js"), loadStrings("wiki"), loadCss("wiki")]).then(([m]) => m);
}

/**
 * Like api(), but resolves to the whole JSON answer, for the fields an envelope carries beside
 * `data` (a chunk's PATCH answers `embedding` there). Errors are ApiErrors with the API's message.
 */
async function apiAnswer(method, path, { body, signal } = {}) {
  const init = { method, credentials: "same-origin", signal, headers: apiHeaders() };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!r.ok || json?.success === false) {
    // An ended session: a plain request lets the shell show the login form.
    if (r.status === 401) api("GET", BASE).catch(() => {});
    const m = json && (json.detail ?? json.message ?? json.error?.message ?? json.error);
    throw new ApiError(r.status, typeof m === "string" ? serverText(m) : text || `HTTP ${r.status}`, json?.error_code || json?.code);
  }
  return json;
}

// ---------------------------------------------------------------------------------------
// Small helpers

/**
 * Runs `tick(opts)` every POLL_MS while it resolves true (something is processing) and stops
 * when it resolves false; slower in a hidden tab. `kick()` runs it now with `{force: true}`
 * (after a change made here); `wake()` runs it now unforced, and happens by itself when the
 * window gets the focus back or the tab becomes visible (changes made elsewhere show up
 * without polling an idle server). Everything stops when `signal` aborts.
 */
function poller(signal, tick) {
  let timer = null;
  let running = false;
  let queued = null;
  const schedule = (delay, opts) => {
    if (signal.aborted) return;
    clearTimeout(timer);
    timer = setTimeout(() => run(opts), delay);
  };
  async function run(opts = {}) {
    timer = null;
    if (running) {
      queued = { ...queued, ...opts };
      return;
    }
    running = true;
    let active = false;
    try {
      active = await tick(opts);
    } catch (e) {
      if (signal.aborted || e.name === "AbortError") return;
      console.warn(e);
      active = true; // a network blip: try again
    } finally {
      running = false;
    }
    if (queued) {
      const next = queued;
      queued = null;
      schedule(0, next);
    } else if (active) schedule(document.hidden ? POLL_MS * 3 : POLL_MS);
  }
  const wake = () => {
    if (!document.hidden && !running) schedule(0, {});
  };
  const onVisible = () => !document.hidden && wake();
  window.addEventListener("focus", wake);
  document.addEventListener("visibilitychange", onVisible);
  signal.addEventListener("abort", () => {
    clearTimeout(timer);
    window.removeEventListener("focus", wake);
    document.removeEventListener("visibilitychange", onVisible);
  });
  return { kick: () => schedule(0, { force: true }), wake, start: (active) => active && schedule(POLL_MS) };
}

/** What the session may do: `write` (documents) and `admin` (knowledge bases). */
function rights(session) {
  const level = ["read", "write", "admin"].indexOf(session?.access ?? "admin");
  const ro = !!session?.read_only;
  return { write: !ro && level >= 1, admin: !ro && level >= 2 };
}
/** `t()` with `<key>_one` or `<key>_other`, chosen by `vars.n`. */
const tn = (key, vars) => t(`${key}_${Number(vars.n) === 1 ? "one" : "other"}`, vars);
const activeCount = (c) => (c ? (c.pending || 0) + (c.processing || 0) : 0);
const ext = (name) => (/\.([^./\\]+)$/.exec(name || "")?.[1] || "").toLowerCase();

// --- Readers of a document (README "Who reads which document") ---------------------------
/** Reader keys typed in a field: comma- or space-separated, empty ones dropped. */
export function readerKeys(text) {
  return String(text || "").split(/[\s,]+/).map((k) => k.trim()).filter(Boolean);
}
/** `everyone` (absent: every reader of the knowledge base), `admins` (`[]`) or `listed`. */
function readersKind(readers) {
  return readers === undefined || readers === null ? "everyone" : readers.length ? "listed" : "admins";
}
/** The readers in words: "Everyone", "Admins only" or the keys. */
function readersText(readers) {
  const kind = readersKind(readers);
  return kind === "everyone" ? t("kb.readers.everyone") : kind === "admins" ? t("kb.readers.admins") : readers.join(", ");
}
/** A small indicator of who reads a document (the keys shown up to three). */
function readersBadge(readers) {
  const kind = readersKind(readers);
  const shown = kind === "listed" && readers.length > 3 ? `${readers.slice(0, 3).join(", ")} +${readers.length - 3}` : readersText(readers);
  return h(
    "span",
    { class: `kb-readers kb-readers-${kind}`, dataset: { testid: "doc-readers", readers: kind }, title: readersText(readers) },
    kind === "everyone" ? null : icon("lock"),
    h("span", {}, shown),
  );
}
/** Keys offered as suggestions: the space's groups and members (none when they cannot be read). */
async function readerSuggestions(session, signal) {
  const space = app.space || session?.space?.id;
  const [groups, members] = await Promise.all([
    api("GET", "/api/v1/groups", { signal }).catch(() => []),
    space ? api("GET", `/api/v1/spaces/${encodeURIComponent(space)}/members`, { signal }).catch(() => []) : [],
  ]);
  return [...(groups || []).map((g) => `group:${g.name}`), ...(members || []).map((m) => `user:${m.user}`)];
}
/** Buttons that add a suggested key to a keys field. */
function suggestionButtons(input, keys) {
  if (!keys.length) return null;
  return h(
    "div",
    { class: "kb-readers-suggest", role: "group", "aria-label": t("kb.readers.suggestions") },
    h("span", { class: "hint" }, t("kb.readers.suggestions")),
    keys.map((k) =>
      h("button", {
        class: "btn btn-small",
        type: "button",
        "aria-label": t("kb.readers.add_key", { key: k }),
        onclick: () => {
          const have = readerKeys(input.value);
          if (!have.includes(k)) input.value = [...have, k].join(", ");
          input.dispatchEvent(new Event("input"));
          input.focus();
        },
      }, k),
    ),
  );
}

function statusBadge(status) {
  const cls = status === "ready" ? "badge-ok" : status === "failed" ? "badge-danger" : status === "pending" ? "" : "badge-info";
  return h("span", { class: `badge ${cls} kb-status kb-status-${status}`, dataset: { status } }, t(`kb.status.${status}`));
}

/** Ready / processing / failed counts as badges. */
function countBadges(c) {
  const n = c || {};
  return h(
    "ul",
    { class: "kb-counts", "aria-label": t("kb.counts_label") },
    h("li", { class: `badge ${n.ready ? "badge-ok" : ""}`, dataset: { count: "ready" } }, t("kb.count.ready", { n: fmtNumber(n.ready) })),
    h("li", { class: `badge ${activeCount(n) ? "badge-info" : ""}`, dataset: { count: "processing" } }, t("kb.count.processing", { n: fmtNumber(activeCount(n)) })),
    h("li", { class: `badge ${n.failed ? "badge-danger" : ""}`, dataset: { count: "failed" } }, t("kb.count.failed", { n: fmtNumber(n.failed) })),
  );
}

/** Prevents the browser from opening files dropped outside a drop zone (until `signal`). */
function guardWindowDrops(signal) {
  const stop = (e) => {
    if (e.dataTransfer && [...(e.dataTransfer.types || [])].includes("Files")) e.preventDefault();
  };
  window.addEventListener("dragover", stop);
  window.addEventListener("drop", stop);
  signal.addEventListener("abort", () => {
    window.removeEventListener("dragover", stop);
    window.removeEventListener("drop", stop);
  });
}

// ---------------------------------------------------------------------------------------
// Create / edit / delete a knowledge base

/** Which field an API validation message is about. */
function fieldOf(message) {
  const m = String(message || "").toLowerCase();
  if (m.includes("chunk_overlap")) return "chunk_overlap";
  if (m.includes("chunk_size")) return "chunk_size";
  if (m.includes("description")) return "description";
  if (m.includes("name") || m.includes("exists") || m.includes("collection")) return "name";
  return null;
}

function kbDialog({ kb, onSaved }) {
  const editing = !!kb;
  const d = openDialog({ title: editing ? t("kb.edit_title", { name: kb.name }) : t("kb.create_title") });
  const uid = Math.random().toString(36).slice(2, 8);
  const id = (f) => `kbf-${uid}-${f}`;
  const error = h("p", { class: "form-error", id: id("error"), role: "alert" });
  const inputs = {
    name: h("input", {
      id: id("name"),
      name: "name",
      required: true,
      maxlength: "64",
      autocomplete: "off",
      spellcheck: "false",
      value: kb?.name || "",
    }),
    description: h("textarea", { id: id("description"), name: "description", maxlength: "2000", rows: "3" }),
    chunk_size: h("input", { id: id("chunk_size"), name: "chunk_size", type: "number", min: "100", max: "20000", step: "1", inputmode: "numeric", placeholder: t("kb.form.chunk_default") }),
    chunk_overlap: h("input", { id: id("chunk_overlap"), name: "chunk_overlap", type: "number", min: "0", step: "1", inputmode: "numeric", placeholder: t("kb.form.overlap_default") }),
  };
  inputs.description.value = kb?.description || "";
  const errs = {};
  const field = (key, label, hint) => {
    errs[key] = h("p", { class: "kb-field-error", id: id(`${key}-error`), role: "alert" });
    const described = [hint ? id(`${key}-hint`) : null, id(`${key}-error`)].filter(Boolean).join(" ");
    inputs[key].setAttribute("aria-describedby", key.startsWith("chunk") && !editing ? `${id("chunk-hint")} ${described}` : described);
    return h("div", { class: "field" }, h("label", { for: id(key) }, label), inputs[key], hint ? h("span", { class: "hint", id: id(`${key}-hint`) }, hint) : null, errs[key]);
  };
  const chunking = editing
    ? h(
        "p",
        { class: "hint" },
        kb.chunk_size
          ? t("kb.form.chunking_fixed", { size: kb.chunk_size, overlap: kb.chunk_overlap ?? 0 })
          : t("kb.form.chunking_default_fixed"),
      )
    : h(
        "details",
        { class: "kb-advanced" },
        h("summary", {}, t("kb.form.chunking")),
        h("p", { class: "hint", id: id("chunk-hint") }, t("kb.form.chunk_hint")),
        h("div", { class: "kb-form-row" }, field("chunk_size", t("kb.form.chunk_size")), field("chunk_overlap", t("kb.form.chunk_overlap"))),
      );
  const form = h(
    "form",
    { id: id("form"), class: "kb-form", novalidate: true },
    field("name", t("kb.form.name"), t("kb.form.name_hint")),
    field("description", t("kb.form.description")),
    chunking,
    error,
  );
  const submit = h("button", { class: "btn btn-primary", type: "submit", form: id("form") }, editing ? t("common.save") : t("common.create"));
  d.body.append(form);
  d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), submit);
  inputs.name.focus();

  const fail = (message, key) => {
    error.textContent = "";
    for (const [k, el] of Object.entries(inputs)) {
      el.removeAttribute("aria-invalid");
      if (errs[k]) errs[k].textContent = "";
    }
    const el = key && inputs[key];
    if (el && errs[key]) {
      errs[key].textContent = message;
      el.setAttribute("aria-invalid", "true");
      if (el.closest("details")) el.closest("details").open = true;
      el.focus();
    } else error.textContent = message;
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = inputs.name.value.trim();
    const description = inputs.description.value.trim();
    if (!name) return fail(t("kb.form.name_required"), "name");
    // The server's rule (checked here too, so a typo costs no round trip): letters, digits,
    // "-", "_", "."; not starting with "." or "-"; at most 64 characters.
    if (!/^[\p{L}\p{N}_][\p{L}\p{N}\p{M}_.-]*$/u.test(name) || [...name].length > 64) {
      return fail(t("kb.form.name_invalid", { suggestion: name.replace(/[^\p{L}\p{N}\p{M}_.-]+/gu, "-").replace(/^[.-]+/, "").slice(0, 64) || "docs" }), "name");
    }
    const body = editing ? {} : { name, description };
    if (editing) {
      if (name !== kb.name) body.name = name;
      if (description !== (kb.description || "")) body.description = description;
      if (!Object.keys(body).length) return d.close();
    } else {
      const size = inputs.chunk_size.value.trim();
      const overlap = inputs.chunk_overlap.value.trim();
      if (size) body.chunk_size = Number(size);
      if (overlap) body.chunk_overlap = Number(overlap);
      if (overlap && !size) return fail(t("kb.form.overlap_needs_size"), "chunk_overlap");
    }
    submit.disabled = true;
    fail("", null);
    try {
      const saved = editing ? await api("PATCH", `${BASE}/${encodeURIComponent(kb.id)}`, { body }) : await api("POST", BASE, { body });
      d.close();
      const msg = editing ? t("kb.saved", { name: saved.name }) : t("kb.created", { name: saved.name });
      toast(msg, "success");
      announce(msg);
      onSaved(saved);
    } catch (err) {
      submit.disabled = false;
      fail(err.message, fieldOf(err.message));
    }
  });
}

async function deleteKb(kb) {
  const ok = await confirmDialog(tn("kb.delete_confirm", { name: kb.name, n: fmtNumber(kb.document_count) }), {
    danger: true,
    confirmLabel: t("kb.delete"),
  });
  if (!ok) return false;
  try {
    await api("DELETE", `${BASE}/${encodeURIComponent(kb.id)}`);
    const msg = t("kb.deleted", { name: kb.name });
    toast(msg, "success");
    announce(msg);
    return true;
  } catch (err) {
    toast(err.message, "error");
    announce(err.message, { assertive: true });
    return false;
  }
}

// ---------------------------------------------------------------------------------------
// #/kb: the list

async function listPage({ root, signal, session }) {
  const canWrite = rights(session).admin;
  const create = canWrite
    ? h("button", { class: "btn btn-primary", type: "button", onclick: () => kbDialog({ onSaved: (kb) => navigate(`#/kb/${encodeURIComponent(kb.id)}`) }) }, icon("plus"), t("kb.create"))
    : null;
  const body = h("div", { class: "kb-list", "aria-busy": "true" }, h("p", { class: "loading" }, t("common.loading")));
  replace(root, pageHeader(t("kb.title"), create), h("p", { class: "muted kb-intro" }, t("kb.intro")), body);

  let kbs = null;
  const cards = new Map(); // id → {card, counts, meta}
  const card = (kb) => {
    const href = `#/kb/${encodeURIComponent(kb.id)}`;
    const counts = countBadges(kb.status_counts);
    const meta = h("p", { class: "kb-card-meta muted" });
    const fillMeta = (k) =>
      replace(meta, tn("kb.card_meta", { n: fmtNumber(k.document_count), size: fmtBytes(k.total_bytes), date: fmtDate(k.updated_at) }));
    fillMeta(kb);
    const actions = canWrite
      ? h(
          "div",
          { class: "kb-card-actions" },
          h("button", { class: "btn btn-icon", type: "button", "aria-label": t("kb.edit_named", { name: kb.name }), title: t("common.edit"), onclick: () => kbDialog({ kb, onSaved: () => poll.kick() }) }, icon("edit")),
          h(
            "button",
            {
              class: "btn btn-icon btn-danger",
              type: "button",
              "aria-label": t("kb.delete_named", { name: kb.name }),
              title: t("common.delete"),
              onclick: async () => {
                if (await deleteKb(kb)) poll.kick();
              },
            },
            icon("trash"),
          ),
        )
      : null;
    const el = h(
      "article",
      { class: "card kb-card", dataset: { testid: "kb-card", id: kb.id } },
      h("div", { class: "kb-card-head" }, h("span", { class: "kb-card-icon" }, icon("doc")), h("h2", {}, h("a", { href, class: "kb-card-link" }, kb.name)), actions),
      h("p", { class: `kb-card-desc${kb.description ? "" : " muted"}` }, kb.description || t("kb.no_description")),
      counts,
      meta,
    );
    return { el, counts, fillMeta, sig: `${kb.name}|${kb.description}` };
  };

  const draw = () => {
    body.removeAttribute("aria-busy");
    if (!kbs.length) {
      cards.clear();
      replace(body, emptyState(t("kb.empty"), create ? h("button", { class: "btn btn-primary", type: "button", onclick: () => create.click() }, icon("plus"), t("kb.create")) : null));
      return;
    }
    const ids = kbs.map((k) => k.id).join();
    const same = ids === [...cards.keys()].join() && kbs.every((k) => cards.get(k.id).sig === `${k.name}|${k.description}`);
    if (same) {
      // Counts only: update in place (focus and scroll stay where they are).
      for (const kb of kbs) {
        const c = cards.get(kb.id);
        const fresh = countBadges(kb.status_counts);
        c.counts.replaceWith(fresh);
        c.counts = fresh;
        c.fillMeta(kb);
      }
      return;
    }
    cards.clear();
    for (const kb of kbs) cards.set(kb.id, card(kb));
    replace(body, h("div", { class: "grid kb-grid" }, [...cards.values()].map((c) => c.el)));
  };

  let prevActive = null;
  const poll = poller(signal, async () => {
    kbs = await api("GET", BASE, { signal });
    draw();
    const active = kbs.reduce((n, k) => n + activeCount(k.status_counts), 0);
    if (prevActive !== null && active === 0 && prevActive > 0) announce(t("kb.all_processed"));
    prevActive = active;
    return active > 0;
  });
  try {
    kbs = await api("GET", BASE, { signal });
    draw();
    prevActive = kbs.reduce((n, k) => n + activeCount(k.status_counts), 0);
    poll.start(prevActive > 0);
  } catch (e) {
    if (signal.aborted) return;
    replace(body, errorBlock(e, () => navigate("#/kb")));
  }
  root.dataset.ready = "true";
}

// ---------------------------------------------------------------------------------------
// #/kb/<id>: one knowledge base

async function kbPage({ root, params, query, signal, session }) {
  const key = params[0];
  const canWrite = rights(session).write;
  const canAdmin = rights(session).admin;
  replace(root, h("p", { class: "loading" }, t("common.loading")));
  let kb;
  try {
    const all = await api("GET", BASE, { signal });
    kb = all.find((k) => k.id === key) || all.find((k) => k.name === key);
    if (!kb) throw new ApiError(404, t("kb.not_found", { id: key }));
  } catch (e) {
    if (signal.aborted) return;
    replace(
      root,
      h("nav", { class: "kb-crumbs", "aria-label": t("kb.breadcrumb") }, h("a", { href: "#/kb" }, t("kb.title"))),
      pageHeader(t("kb.title")),
      errorBlock(e, () => navigate(location.hash)),
    );
    root.dataset.ready = "true";
    return;
  }
  const docsUrl = () => `${BASE}/${encodeURIComponent(kb.id)}/documents`;
  guardWindowDrops(signal);

  // --- Header -------------------------------------------------------------------------
  const title = h("h1", {}, kb.name);
  const desc = h("p", { class: "kb-desc muted" });
  const summary = h("div", { class: "kb-summary" });
  // Embedding runs space-wide, so the backlog and its estimate are the space's.
  const embedding = h("p", { class: "kb-embedding muted", role: "status", hidden: true });
  const drawEmbedding = async () => {
    const waiting = state.docs.some((d) => d.status === "embedding") || activeCount(kb.status_counts) > 0;
    // A line that cannot be drawn is left out (never an error on the page).
    const e = waiting ? await api("GET", "/api/v1/queue", { signal }).then((q) => q.embedding, () => null) : null;
    embedding.hidden = !e || !e.chunks_pending;
    if (embedding.hidden) return;
    embedding.textContent =
      e.eta_seconds != null
        ? t("kb.embedding_eta", { n: fmtNumber(e.chunks_pending), rate: fmtNumber(e.chunks_per_second), eta: fmtEta(e.eta_seconds) })
        : t("kb.embedding_left", { n: fmtNumber(e.chunks_pending) });
  };
  const drawHeader = () => {
    title.textContent = kb.name;
    document.title = `${kb.name} · Quarry`;
    replace(desc, kb.description || t("kb.no_description"));
    replace(
      summary,
      countBadges(kb.status_counts),
      h(
        "span",
        { class: "muted" },
        tn("kb.card_meta", { n: fmtNumber(kb.document_count), size: fmtBytes(kb.total_bytes), date: fmtDate(kb.updated_at) }),
        " · ",
        kb.chunk_size ? t("kb.chunking_is", { size: kb.chunk_size, overlap: kb.chunk_overlap ?? 0 }) : t("kb.chunking_default"),
      ),
    );
  };
  const headActions = canAdmin
    ? [
        h("button", { class: "btn", type: "button", onclick: () => kbDialog({ kb, onSaved: (saved) => Object.assign(kb, saved) && drawHeader() }) }, icon("edit"), t("common.edit")),
        h(
          "button",
          {
            class: "btn btn-danger",
            type: "button",
            onclick: async () => {
              if (await deleteKb(kb)) navigate("#/kb");
            },
          },
          icon("trash"),
          t("common.delete"),
        ),
      ]
    : [];
  // The retrieval test page (js/retrieval.js): what a search returns here, and why.
  const testLink = h(
    "a",
    { class: "btn", href: `#/kb/${encodeURIComponent(kb.id)}/test`, dataset: { testid: "retrieval-test-link" } },
    icon("search"),
    t("kb.rt_link"),
  );
  // The wiki (js/wiki.js): the pages agents wrote from this knowledge base, and what is stale.
  const wikiLink = h("a", { class: "btn", href: `#/kb/${encodeURIComponent(kb.id)}/wiki`, dataset: { testid: "wiki-link" } }, icon("doc"), t("kb.wiki_link"));
  const head = h("div", { class: "page-head" }, title, h("div", { class: "page-actions" }, wikiLink, testLink, headActions));
  drawHeader();

  // --- State ----------------------------------------------------------------------------
  const state = {
    status: "",
    name: "",
    sort: { key: "created_at", dir: "desc" },
    page: 1,
    pageSize: PAGE_SIZES[0],
    docs: [],
    loaded: false,
    selected: new Set(),
  };
  const uploads = []; // upload rows, see addUploads()

  // --- Documents table ----------------------------------------------------------------
  const statusSelect = h(
    "select",
    { id: "kb-filter-status", onchange: () => ((state.status = statusSelect.value), (state.page = 1), poll.kick()) },
    h("option", { value: "" }, t("kb.filter.all")),
    STATUSES.map((s) => h("option", { value: s }, t(`kb.status.${s}`))),
  );
  let nameTimer = null;
  const nameInput = h("input", {
    id: "kb-filter-name",
    type: "search",
    autocomplete: "off",
    placeholder: t("kb.filter.name_placeholder"),
    oninput: () => {
      clearTimeout(nameTimer);
      nameTimer = setTimeout(() => {
        state.name = nameInput.value.trim();
        state.page = 1;
        poll.kick();
      }, 250);
    },
  });
  const toolbar = h(
    "div",
    { class: "kb-toolbar" },
    h("div", { class: "kb-filter" }, h("label", { for: "kb-filter-status" }, t("kb.filter.status")), statusSelect),
    h("div", { class: "kb-filter kb-filter-grow" }, h("label", { for: "kb-filter-name" }, t("kb.filter.name")), nameInput),
    h("button", { class: "btn", type: "button", onclick: () => poll.kick() }, icon("refresh"), t("common.refresh")),
  );
  const bulkCount = h("span", { class: "kb-bulk-count", role: "status" });
  const bulkRetry = h("button", { class: "btn btn-small", type: "button", onclick: () => bulkAction("retry") }, icon("retry"), t("kb.bulk.retry"));
  const bulkDelete = h("button", { class: "btn btn-small btn-danger", type: "button", onclick: () => bulkAction("delete") }, icon("trash"), t("kb.bulk.delete"));
  const bulkClear = h("button", { class: "btn btn-small", type: "button", onclick: () => (state.selected.clear(), drawTable()) }, t("kb.bulk.clear"));
  const bulkBar = h("div", { class: "kb-bulk", hidden: true, role: "region", "aria-label": t("kb.bulk.label") }, bulkCount, bulkRetry, bulkDelete, bulkClear);
  const selectAll = h("input", { type: "checkbox", "aria-label": t("kb.select_page"), onchange: () => {
    for (const d of pageDocs()) selectAll.checked ? state.selected.add(d.id) : state.selected.delete(d.id);
    drawTable();
  } });
  const sortable = [
    ["file_name", t("kb.col.name")],
    ["format", t("kb.col.type")],
    ["size", t("kb.col.size")],
    ["status", t("kb.col.status")],
  ];
  const sortHeader = (k, label) => {
    const th = h("th", { scope: "col", dataset: { sort: k } });
    th.append(h("button", { class: "kb-sort", type: "button", onclick: () => {
      state.sort = { key: k, dir: state.sort.key === k && state.sort.dir === "asc" ? "desc" : "asc" };
      drawTable();
    } }, label, h("span", { class: "kb-sort-mark", "aria-hidden": "true" })));
    return th;
  };
  const headRow = h(
    "tr",
    {},
    canWrite ? h("th", { scope: "col", class: "kb-col-check" }, selectAll) : null,
    sortable.map(([k, label]) => sortHeader(k, label)),
    h("th", { scope: "col" }, t("kb.col.readers")),
    h("th", { scope: "col" }, t("kb.col.stage")),
    h("th", { scope: "col" }, t("kb.col.pages")),
    sortHeader("updated_at", t("kb.col.updated")),
    h("th", { scope: "col" }, h("span", { class: "sr-only" }, t("common.actions"))),
  );
  const tbody = h("tbody");
  const table = h("table", { class: "kb-docs", "aria-labelledby": "kb-docs-title" }, h("thead", {}, headRow), tbody);
  const tableWrap = h("div", { class: "table-wrap" }, table);
  const tableArea = h("div", { class: "kb-table-area" });
  const pager = h("nav", { class: "kb-pager", "aria-label": t("kb.pager") });
  const rowCache = new Map(); // id → {sig, tr}

  const sorted = () => {
    const { key: k, dir } = state.sort;
    const m = dir === "asc" ? 1 : -1;
    const val = (d) => (k === "status" ? STATUSES.indexOf(d.status) : d[k] ?? "");
    return [...state.docs].sort((a, b) => {
      const x = val(a);
      const y = val(b);
      const c = typeof x === "string" ? x.localeCompare(y, undefined, { numeric: true, sensitivity: "base" }) : x - y;
      return c * m || (a.created_at - b.created_at) * m;
    });
  };
  const pageCount = () => Math.max(1, Math.ceil(state.docs.length / state.pageSize));
  const pageDocs = () => {
    state.page = Math.min(Math.max(1, state.page), pageCount());
    return sorted().slice((state.page - 1) * state.pageSize, state.page * state.pageSize);
  };

  const stageText = (d) => {
    if (d.status === "failed") return d.attempts > 1 ? t("kb.stage.failed_after", { n: d.attempts }) : t("kb.stage.failed");
    const step = ["pending", "converting", "indexing", "embedding"].indexOf(d.status);
    if (step < 0) return t("kb.stage.done");
    const s = t(`kb.stage.${d.status}`);
    return d.attempts ? t("kb.stage.retrying", { stage: s, n: d.attempts + 1 }) : s;
  };

  const row = (d) => {
    const sig = [d.status, d.updated_at, d.error, d.chunk_count, d.pages, d.file_name, state.selected.has(d.id), JSON.stringify(d.readers ?? null), !!d.synced].join("|");
    const hit = rowCache.get(d.id);
    if (hit && hit.sig === sig) return hit.tr;
    const name = d.file_name;
    const notes = [];
    if (d.pages_without_text) notes.push(t("kb.no_text_pages", { pages: serverText(d.pages_without_text) }));
    // Documents converted before the converter stopped repeating pages_without_text as a
    // warning still carry "no text layer on page 1 (not OCR'd)": shown once, above.
    const repeated = d.pages_without_text ? `no text layer on ${d.pages_without_text}` : null;
    for (const w of d.warnings || []) if (!repeated || !w.startsWith(repeated)) notes.push(serverText(w));
    const pages = [d.pages ? tn("kb.n_pages", { n: fmtNumber(d.pages) }) : null, d.chunk_count ? tn("kb.n_chunks", { n: fmtNumber(d.chunk_count) }) : null].filter(Boolean);
    const tr = h(
      "tr",
      { dataset: { id: d.id, status: d.status, testid: "doc-row" }, class: state.selected.has(d.id) ? "is-selected" : "" },
      canWrite
        ? h("td", { class: "kb-col-check" }, h("input", {
            type: "checkbox",
            checked: state.selected.has(d.id),
            "aria-label": t("kb.select_doc", { name }),
            dataset: { act: "select" },
            onchange: (e) => {
              e.target.checked ? state.selected.add(d.id) : state.selected.delete(d.id);
              drawTable();
            },
          }))
        : null,
      h(
        "td",
        { class: "kb-col-name" },
        h("button", { class: "btn-link kb-doc-name", type: "button", dataset: { act: "preview" }, title: t("kb.preview_named", { name }), onclick: () => openPreview(d.id) }, name),
        notes.length ? h("p", { class: "kb-notes muted" }, notes.join(" · ")) : null,
      ),
      h("td", { class: "kb-col-type" }, (d.format || ext(name)).toUpperCase()),
      h("td", { class: "kb-col-size" }, fmtBytes(d.size)),
      h(
        "td",
        { class: "kb-col-status" },
        statusBadge(d.status),
        d.status === "failed" && d.error ? h("p", { class: "kb-error", dataset: { testid: "doc-error" } }, serverText(d.error)) : null,
      ),
      h(
        "td",
        { class: "kb-col-readers" },
        canAdmin && !d.synced
          ? h("button", {
              class: "btn-link kb-readers-btn",
              type: "button",
              dataset: { act: "readers" },
              "aria-label": t("kb.readers.change_named", { name, readers: readersText(d.readers) }),
              title: t("kb.readers.change"),
              onclick: () => readersDialog(d),
            }, readersBadge(d.readers))
          : readersBadge(d.readers),
        d.synced ? h("p", { class: "kb-notes muted", dataset: { testid: "doc-readers-synced" } }, t("kb.readers.by_source")) : null,
      ),
      h("td", { class: "kb-col-stage" }, ACTIVE.has(d.status) ? h("span", { class: "kb-spinner", "aria-hidden": "true" }) : null, stageText(d)),
      h("td", { class: "kb-col-pages" }, pages.length ? pages.join(" · ") : "—"),
      h("td", { class: "kb-col-updated" }, fmtDate(d.updated_at)),
      h(
        "td",
        { class: "kb-col-actions" },
        h("div", { class: "kb-row-actions" },
          h("button", { class: "btn btn-icon btn-small", type: "button", dataset: { act: "open" }, "aria-label": t("kb.preview_named", { name }), title: t("kb.preview"), onclick: () => openPreview(d.id) }, icon("doc")),
          canWrite && d.status === "failed"
            ? h("button", { class: "btn btn-icon btn-small", type: "button", dataset: { act: "retry" }, "aria-label": t("kb.retry_named", { name }), title: t("common.retry"), onclick: () => retryDocs([d]) }, icon("retry"))
            : null,
          canWrite
            ? h("button", { class: "btn btn-icon btn-small btn-danger", type: "button", dataset: { act: "delete" }, "aria-label": t("kb.delete_doc_named", { name }), title: t("common.delete"), onclick: () => deleteDocs([d]) }, icon("trash"))
            : null,
        ),
      ),
    );
    rowCache.set(d.id, { sig, tr });
    return tr;
  };

  /** Who reads an uploaded document, changed by an admin (PATCH …/documents/{doc} {readers}). */
  function readersDialog(d) {
    const dlg = openDialog({ title: t("kb.readers.title", { name: d.file_name }) });
    dlg.dialog.dataset.testid = "readers-dialog";
    const group = `kb-readers-${d.id}`;
    const kind = readersKind(d.readers);
    const keys = h("input", {
      id: "kb-readers-keys",
      name: "readers",
      type: "text",
      autocomplete: "off",
      spellcheck: "false",
      placeholder: "group:hr, user:ann",
      value: kind === "listed" ? d.readers.join(", ") : "",
    });
    const choice = (value, label, hint) => {
      const id = `${group}-${value}`;
      return h(
        "div",
        { class: "kb-choice" },
        h("input", { type: "radio", name: group, id, value, checked: value === kind }),
        h("label", { for: id }, label, h("span", { class: "hint" }, hint)),
      );
    };
    const keysHint = h("span", { class: "hint", id: "kb-readers-keys-hint" }, t("kb.readers.keys_hint"));
    keys.setAttribute("aria-describedby", keysHint.id);
    const suggest = h("div");
    const error = h("p", { class: "form-error", role: "alert", dataset: { testid: "readers-error" } });
    const save = h("button", { class: "btn btn-primary", type: "submit", form: "kb-readers-form" }, t("common.save"));
    const form = h(
      "form",
      { id: "kb-readers-form", class: "kb-form", novalidate: true },
      h(
        "fieldset",
        { class: "kb-choices" },
        h("legend", {}, t("kb.readers.who")),
        choice("everyone", t("kb.readers.everyone"), t("kb.readers.everyone_hint")),
        choice("admins", t("kb.readers.admins"), t("kb.readers.admins_hint")),
        choice("listed", t("kb.readers.listed"), t("kb.readers.listed_hint")),
      ),
      h("div", { class: "field" }, h("label", { for: keys.id }, t("kb.readers.keys")), keys, keysHint),
      suggest,
      error,
    );
    // Typing keys chooses "these readers".
    keys.addEventListener("input", () => {
      const listed = form.querySelector(`#${CSS.escape(group)}-listed`);
      if (keys.value.trim()) listed.checked = true;
    });
    readerSuggestions(session, signal).then((list) => replace(suggest, suggestionButtons(keys, list)));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      error.textContent = "";
      const picked = form.querySelector(`input[name="${CSS.escape(group)}"]:checked`)?.value || "everyone";
      let readers = null;
      if (picked === "admins") readers = [];
      if (picked === "listed") {
        readers = readerKeys(keys.value);
        if (!readers.length) {
          error.textContent = t("kb.readers.keys_required");
          announce(error.textContent, { assertive: true });
          keys.focus();
          return;
        }
      }
      save.disabled = true;
      try {
        await api("PATCH", `${docsUrl()}/${encodeURIComponent(d.id)}`, { body: { readers } });
        dlg.close();
        const msg = t("kb.readers.saved", { name: d.file_name, readers: readersText(readers) });
        d.readers = readers === null ? undefined : readers;
        drawTable();
        toast(msg, "success");
        announce(msg);
        poll.kick();
      } catch (err) {
        save.disabled = false;
        error.textContent = err.message;
        announce(err.message, { assertive: true });
      }
    });
    dlg.body.append(form);
    dlg.footer.append(h("button", { class: "btn", type: "button", onclick: () => dlg.close() }, t("common.cancel")), save);
    form.querySelector(`input[name="${CSS.escape(group)}"]:checked`)?.focus();
  }

  const drawPager = () => {
    const total = state.docs.length;
    const pages = pageCount();
    const from = total ? (state.page - 1) * state.pageSize + 1 : 0;
    const to = Math.min(total, state.page * state.pageSize);
    const sizeSel = h(
      "select",
      { id: "kb-page-size", onchange: (e) => ((state.pageSize = Number(e.target.value)), (state.page = 1), drawTable()) },
      PAGE_SIZES.map((n) => h("option", { value: String(n), selected: n === state.pageSize }, String(n))),
    );
    replace(
      pager,
      h("span", { class: "muted", dataset: { testid: "doc-range" } }, t("kb.range", { from: fmtNumber(from), to: fmtNumber(to), total: fmtNumber(total) })),
      h("span", { class: "kb-pager-size" }, h("label", { for: "kb-page-size" }, t("kb.page_size")), sizeSel),
      h("button", { class: "btn btn-small", type: "button", disabled: state.page <= 1, onclick: () => (state.page--, drawTable(true)) }, t("common.previous")),
      h("span", { "aria-live": "polite" }, t("common.page_of", { page: state.page, pages })),
      h("button", { class: "btn btn-small", type: "button", disabled: state.page >= pages, onclick: () => (state.page++, drawTable(true)) }, t("common.next")),
    );
  };

  function drawTable(toTop = false) {
    if (!state.loaded) return;
    for (const th of headRow.querySelectorAll("th[data-sort]")) {
      const on = th.dataset.sort === state.sort.key;
      if (on) th.setAttribute("aria-sort", state.sort.dir === "asc" ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    const list = pageDocs();
    if (!state.docs.length) {
      const filtered = state.status || state.name;
      replace(tableArea, emptyState(filtered ? t("kb.no_match") : t("kb.no_docs")));
      rowCache.clear();
    } else {
      if (tableArea.firstChild !== tableWrap) replace(tableArea, tableWrap, pager);
      const want = list.map(row);
      const now = [...tbody.children];
      if (want.length !== now.length || want.some((tr, i) => tr !== now[i])) {
        const active = document.activeElement;
        const activeRow = active && tbody.contains(active) ? active.closest("tr") : null;
        const act = active?.dataset?.act;
        tbody.replaceChildren(...want);
        if (activeRow && !tbody.contains(active)) {
          const tr = tbody.querySelector(`tr[data-id="${CSS.escape(activeRow.dataset.id)}"]`);
          const target = tr && (tr.querySelector(`[data-act="${act}"]`) || tr.querySelector("button"));
          if (target) target.focus();
        }
      }
      drawPager();
      if (toTop) tableWrap.scrollIntoView({ block: "nearest" });
    }
    const onPage = list.filter((d) => state.selected.has(d.id)).length;
    selectAll.checked = list.length > 0 && onPage === list.length;
    selectAll.indeterminate = onPage > 0 && onPage < list.length;
    const n = state.selected.size;
    bulkBar.hidden = n === 0;
    bulkCount.textContent = tn("kb.bulk.selected", { n: fmtNumber(n) });
    const failedSel = state.docs.filter((d) => state.selected.has(d.id) && d.status === "failed").length;
    bulkRetry.disabled = failedSel === 0;
    bulkRetry.lastChild.textContent = failedSel ? t("kb.bulk.retry_n", { n: fmtNumber(failedSel) }) : t("kb.bulk.retry");
  }

  // --- Loading and polling ------------------------------------------------------------
  let prevCounts = kb.status_counts;
  const announceCounts = (c) => {
    const ready = Math.max(0, (c.ready || 0) - (prevCounts.ready || 0));
    const failed = Math.max(0, (c.failed || 0) - (prevCounts.failed || 0));
    if (ready || failed) {
      const parts = [];
      if (ready) parts.push(tn("kb.live.ready", { n: ready }));
      if (failed) parts.push(tn("kb.live.failed", { n: failed }));
      if (!activeCount(c)) parts.push(t("kb.all_processed"));
      announce(parts.join(" "), { assertive: false });
    }
    prevCounts = c;
  };

  let lastSig = "";
  /** Refreshes the header and, when anything may have changed (or `force`), the documents. */
  async function load({ force = false } = {}) {
    const all = await api("GET", BASE, { signal });
    const fresh = all.find((k) => k.id === kb.id);
    if (fresh) {
      Object.assign(kb, fresh);
      drawHeader();
      announceCounts(fresh.status_counts);
    }
    const sig = JSON.stringify([kb.document_count, kb.status_counts, kb.updated_at, kb.total_bytes]);
    const busy = activeCount(kb.status_counts) > 0 || state.docs.some((d) => ACTIVE.has(d.status)) || uploads.some((u) => u.busy());
    if (!force && !busy && state.loaded && sig === lastSig) return false;
    lastSig = sig;
    const q = { status: state.status || undefined, name: state.name || undefined };
    // Only an upload whose document existed before this list was asked for can be missing
    // from it because it was deleted: one that finished while the request ran is simply newer.
    const knownBefore = new Set(uploads.filter((u) => u.docId).map((u) => u.docId));
    const docs = await api("GET", docsUrl(), { query: q, signal });
    state.docs = docs;
    state.loaded = true;
    const ids = new Set(docs.map((d) => d.id));
    for (const id of state.selected) if (!ids.has(id)) state.selected.delete(id);
    for (const id of rowCache.keys()) if (!ids.has(id)) rowCache.delete(id);
    // Upload rows follow their document's status, even when a filter hides it.
    const waiting = uploads.filter((u) => u.docId && (!u.doc || ACTIVE.has(u.doc.status)));
    let byId = new Map(docs.map((d) => [d.id, d]));
    // The filter this list was fetched with (`q`), not the one set since: a filter cleared
    // while the request ran would otherwise mark a filtered-out upload as deleted.
    if (waiting.some((u) => !byId.has(u.docId)) && (q.status || q.name)) {
      byId = new Map((await api("GET", docsUrl(), { signal })).map((d) => [d.id, d]));
    }
    for (const u of waiting) {
      const d = byId.get(u.docId);
      if (d) u.setDoc(d);
      else if (u.doc && knownBefore.has(u.docId)) u.setGone();
    }
    drawTable();
    // Not awaited: the line has its own request, and the documents' polling never waits on it.
    drawEmbedding();
    return activeCount(kb.status_counts) > 0 || docs.some((d) => ACTIVE.has(d.status)) || uploads.some((u) => u.busy());
  }
  const poll = poller(signal, load);

  // --- Row actions ------------------------------------------------------------------
  async function retryDocs(docs) {
    const failed = docs.filter((d) => d.status === "failed");
    let ok = 0;
    const errors = [];
    for (const d of failed) {
      try {
        await api("POST", `${docsUrl()}/${encodeURIComponent(d.id)}/retry`);
        ok++;
      } catch (e) {
        errors.push(`${d.file_name}: ${e.message}`);
      }
    }
    if (ok) {
      const msg = tn("kb.retried", { n: ok });
      toast(msg, "success");
      announce(msg);
    }
    if (errors.length) toast(errors.join("\n"), "error");
    poll.kick();
  }

  async function deleteDocs(docs, { confirmed = false } = {}) {
    if (!docs.length) return;
    const question = docs.length === 1 ? t("kb.delete_doc_confirm", { name: docs[0].file_name }) : t("kb.delete_docs_confirm", { n: fmtNumber(docs.length) });
    if (!confirmed && !(await confirmDialog(question, { danger: true, confirmLabel: t("common.delete") }))) return;
    let ok = 0;
    const errors = [];
    // A few at a time: fast for hundreds of documents without flooding the server.
    const queue = [...docs];
    const worker = async () => {
      while (queue.length) {
        const d = queue.shift();
        try {
          await api("DELETE", `${docsUrl()}/${encodeURIComponent(d.id)}`);
          ok++;
          state.selected.delete(d.id);
        } catch (e) {
          if (e.status === 404) ok++;
          else errors.push(`${d.file_name}: ${e.message}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(4, docs.length) }, worker));
    const msg = tn("kb.docs_deleted", { n: ok });
    if (ok) {
      toast(msg, "success");
      announce(msg);
    }
    if (errors.length) toast(errors.join("\n"), "error");
    poll.kick();
  }

  function bulkAction(kind) {
    const chosen = state.docs.filter((d) => state.selected.has(d.id));
    if (kind === "retry") retryDocs(chosen);
    else deleteDocs(chosen);
  }

  // --- Uploads --------------------------------------------------------------------------
  const fileInput = h("input", { type: "file", multiple: true, hidden: true, "aria-label": t("kb.up.choose_files"), dataset: { testid: "kb-file-input" } });
  const folderInput = h("input", { type: "file", multiple: true, hidden: true, webkitdirectory: true, "aria-label": t("kb.up.choose_folder"), dataset: { testid: "kb-folder-input" } });
  fileInput.addEventListener("change", () => {
    addUploads([...fileInput.files].map((f) => ({ file: f, path: f.name })));
    fileInput.value = "";
  });
  folderInput.addEventListener("change", () => {
    addUploads([...folderInput.files].map((f) => ({ file: f, path: f.webkitRelativePath || f.name })), { fromFolder: true });
    folderInput.value = "";
  });
  const dropZone = h(
    "button",
    { class: "kb-drop", type: "button", "aria-describedby": "kb-drop-hint", onclick: () => fileInput.click() },
    icon("upload"),
    h("span", { class: "kb-drop-title" }, t("kb.up.drop")),
    h("span", { class: "kb-drop-hint muted", id: "kb-drop-hint" }, t("kb.up.hint", { types: "PDF, DOCX, XLSX, PPTX, CSV, HTML, TXT, MD, JSON" })),
  );
  let dragDepth = 0;
  dropZone.addEventListener("dragenter", (e) => {
    e.preventDefault();
    dragDepth++;
    dropZone.classList.add("is-over");
  });
  dropZone.addEventListener("dragover", (e) => {
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = "copy";
  });
  dropZone.addEventListener("dragleave", () => {
    if (--dragDepth <= 0) dropZone.classList.remove("is-over");
  });
  dropZone.addEventListener("drop", async (e) => {
    e.preventDefault();
    dragDepth = 0;
    dropZone.classList.remove("is-over");
    const { items, folder } = await filesFromDrop(e.dataTransfer);
    addUploads(items, { fromFolder: folder });
  });
  const uploadList = h("ul", { class: "kb-uploads", "aria-label": t("kb.up.list"), tabindex: "0" });
  const clearDone = h("button", { class: "btn btn-small", type: "button", hidden: true, onclick: () => {
    for (const u of [...uploads]) if (!u.busy()) u.remove();
    clearDone.hidden = !uploads.some((u) => !u.busy());
  } }, t("kb.up.clear"));
  // Who reads what is uploaded next (empty: every reader of the knowledge base).
  const upReadersInput = h("input", {
    id: "kb-up-readers",
    name: "readers",
    type: "text",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "group:hr, user:ann",
    "aria-describedby": "kb-up-readers-hint",
  });
  const upReaders = h(
    "div",
    { class: "field kb-up-readers" },
    h("label", { for: upReadersInput.id }, t("kb.up.readers")),
    upReadersInput,
    h("span", { class: "hint", id: "kb-up-readers-hint" }, t("kb.up.readers_hint")),
  );
  const uploadSection = canWrite
    ? h(
        "section",
        { class: "kb-upload card", "aria-labelledby": "kb-upload-title" },
        h("div", { class: "kb-section-head" }, h("h2", { id: "kb-upload-title" }, t("kb.up.title")), h("div", { class: "row" },
          h("button", { class: "btn", type: "button", onclick: () => fileInput.click() }, icon("doc"), t("kb.up.choose_files")),
          h("button", { class: "btn", type: "button", onclick: () => folderInput.click() }, icon("upload"), t("kb.up.choose_folder")),
          clearDone,
        )),
        dropZone,
        upReaders,
        fileInput,
        folderInput,
        uploadList,
      )
    : null;

  const queue = [];
  let inFlight = 0;
  let batch = null; // {total, ok, failed, pending} for the announcement at its end

  function addUploads(items, { fromFolder = false } = {}) {
    if (!items.length) return;
    let skipped = 0;
    const rows = [];
    for (const it of items) {
      const base = it.path.split("/").pop();
      const supported = SUPPORTED.includes(ext(base));
      if (fromFolder && (base.startsWith(".") || !supported)) {
        skipped++;
        continue;
      }
      rows.push(uploadRow(it, supported));
    }
    if (skipped) toast(tn("kb.up.skipped", { n: skipped }), "info");
    if (!rows.length) {
      announce(t("kb.up.nothing"), { assertive: true });
      return;
    }
    batch = batch && batch.pending ? batch : { total: 0, ok: 0, failed: 0, pending: 0 };
    for (const r of rows) {
      batch.total++;
      if (r.state === "rejected") batch.failed++;
      else {
        batch.pending++;
        queue.push(r);
      }
    }
    announce(tn("kb.up.started", { n: rows.length }));
    pump();
    finishBatch();
  }

  function finishBatch() {
    if (!batch || batch.pending) return;
    const msg = batch.failed ? t("kb.up.done_failed", { ok: batch.ok, failed: batch.failed }) : tn("kb.up.done", { n: batch.ok });
    announce(msg, { assertive: batch.failed > 0 });
    batch = null;
    clearDone.hidden = !uploads.some((u) => !u.busy());
  }

  function pump() {
    while (inFlight < UPLOAD_CONCURRENCY && queue.length) {
      const r = queue.shift();
      if (r.state !== "queued") continue;
      inFlight++;
      r.start().finally(() => {
        inFlight--;
        if (batch) {
          batch.pending--;
          r.state === "error" || r.state === "cancelled" ? batch.failed++ : batch.ok++;
        }
        finishBatch();
        pump();
      });
    }
  }

  function uploadRow({ file, path }, supported) {
    const readers = readerKeys(upReadersInput.value); // as the field was when the file was added
    const progress = h("progress", { max: "100", value: "0", "aria-label": path });
    const statusEl = h("span", { class: "kb-up-status", dataset: { testid: "upload-status" } });
    const msg = h("span", { class: "kb-up-msg" });
    const cancel = h("button", { class: "btn btn-icon btn-small", type: "button", "aria-label": t("kb.up.cancel_named", { name: path }), title: t("common.cancel") }, icon("close"));
    const li = h("li", { class: "kb-up", dataset: { testid: "upload-row", name: path } },
      h("span", { class: "kb-up-name" }, path, h("span", { class: "muted kb-up-size" }, ` · ${fmtBytes(file.size)}`)),
      progress, statusEl, msg, cancel);
    uploadList.prepend(li);
    const controller = new AbortController();
    const r = {
      state: "queued",
      docId: null,
      doc: null,
      li,
      busy: () => r.state === "queued" || r.state === "uploading" || (r.state === "processing" && !!r.docId),
      set(stateName, label, kind, detail) {
        r.state = stateName;
        li.dataset.state = stateName;
        replace(statusEl, h("span", { class: `badge ${kind ? `badge-${kind}` : ""}` }, label));
        replace(msg, detail || "");
        msg.className = `kb-up-msg${kind === "danger" ? " kb-error" : " muted"}`;
      },
      async start() {
        r.set("uploading", t("kb.up.uploading"), "info");
        const form = new FormData();
        // The readers go before the file (the server reads the parts in order).
        if (readers.length) form.append("readers", readers.join(","));
        form.append("files", file, file.name);
        try {
          const out = await upload(docsUrl(), form, {
            signal: controller.signal,
            onProgress: (loaded, total) => {
              if (total) progress.value = Math.round((loaded / total) * 100);
            },
          });
          progress.value = 100;
          const o = Array.isArray(out) ? out[0] : out;
          if (!o) throw new ApiError(0, t("kb.up.no_answer"));
          if (o.result === "rejected") {
            r.set("error", t("kb.up.rejected"), "danger", serverText(o.reason));
          } else if (o.result === "duplicate") {
            r.set("duplicate", t("kb.up.duplicate"), "warn", t("kb.up.duplicate_of", { name: o.document.file_name }));
          } else {
            r.docId = o.document.id;
            r.setDoc(o.document);
            poll.kick();
          }
        } catch (e) {
          if (e.code === "aborted") {
            r.set("cancelled", t("kb.up.cancelled"), "");
            return;
          }
          // "name: reason" → the reason (the name is right there).
          const reason = String(e.message || "").replace(new RegExp(`^${file.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: `), "");
          const label = e.status === 415 ? t("kb.up.unsupported_label") : e.status === 413 ? t("kb.up.too_large") : t("kb.up.failed");
          r.set("error", label, "danger", reason);
        } finally {
          cancel.hidden = true;
        }
      },
      setDoc(d) {
        r.doc = d;
        progress.value = 100;
        if (d.status === "ready") r.set("ready", t("kb.status.ready"), "ok", d.pages ? tn("kb.n_pages", { n: d.pages }) : "");
        else if (d.status === "failed") r.set("failed", t("kb.status.failed"), "danger", serverText(d.error) || "");
        else r.set("processing", t(`kb.status.${d.status}`), "info", t("kb.up.processing"));
        clearDone.hidden = !uploads.some((u) => !u.busy());
      },
      setGone() {
        r.docId = null;
        r.set("gone", t("kb.up.gone"), "");
      },
      remove() {
        li.remove();
        uploads.splice(uploads.indexOf(r), 1);
      },
    };
    cancel.addEventListener("click", () => {
      if (r.state === "queued") {
        r.set("cancelled", t("kb.up.cancelled"), "");
        cancel.hidden = true;
        if (batch) {
          batch.pending--;
          batch.failed++;
          finishBatch();
        }
      } else controller.abort();
    });
    uploads.push(r);
    if (!supported) {
      progress.value = 0;
      r.set("rejected", t("kb.up.unsupported_label"), "danger", t("kb.up.unsupported", { ext: ext(path) || "—", types: SUPPORTED.join(", ") }));
      cancel.hidden = true;
    } else r.set("queued", t("kb.up.queued"), "");
    return r;
  }

  // --- Layout ---------------------------------------------------------------------------
  const docsSection = h(
    "section",
    { class: "kb-docs-section", "aria-labelledby": "kb-docs-title" },
    h("div", { class: "kb-section-head" }, h("h2", { id: "kb-docs-title" }, t("kb.docs_title"))),
    toolbar,
    bulkBar,
    tableArea,
  );
  // The Sources tab's address is `#/kb/<id>/sources` (a reload or a link comes back to it).
  let tabsReady = false;
  // `#/kb/<id>/sources?add=1&question=…` (the Insight page's "Add a source"): the tab opens
  // with its Add source dialog, for that question; once the dialog closes, added or not, the
  // address loses both, so a reload does not open it again.
  let addNow = params[1] === "sources" && query?.get("add") === "1" ? { question: query.get("question") || "", onClose: forgetAdd } : null;
  function forgetAdd() {
    if (signal.aborted) return;
    const [path, q = ""] = location.hash.split("?");
    const rest = new URLSearchParams(q);
    rest.delete("add");
    rest.delete("question");
    const left = rest.toString();
    history.replaceState(null, "", left ? `${path}?${left}` : path);
  }
  const tabSet = tabs(
    [
      { id: "docs", label: t("kb.tab.docs"), render: (p) => p.append(uploadSection || "", docsSection) },
      { id: "search", label: t("kb.tab.search"), render: (p) => p.append(searchPanel()) },
      { id: "sources", label: t("kb.tab.sources"), render: (p) => sourcesTab(p) },
    ],
    {
      label: t("kb.tabs_label"),
      onChange: (id) => {
        if (!tabsReady || signal.aborted) return;
        const base = `#/kb/${encodeURIComponent(kb.id)}`;
        if (id === "sources") history.replaceState(null, "", `${base}/sources`);
        else if (/^#\/kb\/[^/?]+\/sources/.test(location.hash)) history.replaceState(null, "", base);
      },
    },
  );
  const sourcesTabButton = tabSet.el.querySelector('[role="tab"]:last-child');
  sourcesTabButton.dataset.testid = "sources-tab";
  /** The tab's label with the number of sources (and of failing ones). */
  const countSources = (n, failing) => {
    sourcesTabButton.textContent = failing
      ? t("kb.tab.sources_failing", { n: fmtNumber(n), failing: fmtNumber(failing) })
      : n
        ? t("kb.tab.sources_n", { n: fmtNumber(n) })
        : t("kb.tab.sources");
    sourcesTabButton.classList.toggle("kb-tab-failing", failing > 0);
  };
  function sourcesTab(panel) {
    panel.append(h("p", { class: "loading" }, t("common.loading")));
    sourcesModule()
      .then((m) => {
        // Once: a retry after an error does not open the dialog again.
        const add = addNow;
        addNow = null;
        return m.sourcesPanel(panel, { kb, kbKey: kb.id, session, signal, onSynced: () => poll.kick(), onCount: countSources, addNow: add });
      })
      .catch((e) => {
        if (signal.aborted || e.name === "AbortError") return;
        console.warn(e);
        replace(
          panel,
          errorBlock(e, () => {
            replace(panel);
            sourcesTab(panel);
          }),
        );
      });
  }
  replace(
    root,
    h("nav", { class: "kb-crumbs", "aria-label": t("kb.breadcrumb") }, h("a", { href: "#/kb" }, t("kb.title")), h("span", { "aria-hidden": "true" }, " / "), h("span", { "aria-current": "page" }, kb.name)),
    head,
    desc,
    summary,
    embedding,
    tabSet.el,
  );
  replace(tableArea, h("p", { class: "loading" }, t("common.loading")));
  if (params[1] === "sources") tabSet.select("sources");
  tabsReady = true;

  try {
    poll.start(await load({ force: true }));
  } catch (e) {
    if (signal.aborted) return;
    replace(tableArea, errorBlock(e, () => poll.kick()));
  }
  root.dataset.ready = "true";
  // How many sources sync this knowledge base, on the tab (a line that cannot be drawn is left out).
  if (params[1] !== "sources") {
    api("GET", `${BASE}/${encodeURIComponent(kb.id)}/sources`, { signal }).then(
      (list) => list.length && countSources(list.length, list.filter((x) => x.failures > 0).length),
      () => {},
    );
  }

  // --- Search -------------------------------------------------------------------------
  function searchPanel() {
    const input = h("input", { id: "kb-search-q", type: "search", required: true, maxlength: "2000", autocomplete: "off", placeholder: t("kb.search.placeholder") });
    const mode = h("select", { id: "kb-search-mode" }, ["hybrid", "keyword", "vector"].map((m) => h("option", { value: m }, t(`kb.search.mode.${m}`))));
    const topK = h("select", { id: "kb-search-k" }, [5, 10, 20, 50].map((n) => h("option", { value: String(n), selected: n === 10 }, String(n))));
    const minScore = h("input", { id: "kb-search-min", type: "number", min: "0", max: "1", step: "0.05", value: "0.3", inputmode: "decimal" });
    const results = h("div", { class: "kb-results", "aria-live": "polite", "aria-busy": "false" });
    const button = h("button", { class: "btn btn-primary", type: "submit" }, icon("search"), t("common.search"));
    let controller = null;
    const filter = filterRow();
    const form = h(
      "form",
      { class: "kb-search card", role: "search" },
      h("div", { class: "field kb-search-q" }, h("label", { for: "kb-search-q" }, t("kb.search.label")), h("div", { class: "row" }, input, button)),
      h("div", { class: "kb-search-opts" },
        h("div", { class: "field" }, h("label", { for: "kb-search-mode" }, t("kb.search.mode")), mode),
        h("div", { class: "field" }, h("label", { for: "kb-search-k" }, t("kb.search.top_k")), topK),
        h("div", { class: "field" }, h("label", { for: "kb-search-min" }, t("kb.search.min_score")), minScore)),
      filter.el,
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const q = input.value.trim();
      if (!q) return input.focus();
      // A condition filled in but not yet added goes in too (and becomes a chip).
      filter.commit();
      const node = filter.node();
      if (controller) controller.abort();
      controller = new AbortController();
      signal.addEventListener("abort", () => controller.abort(), { once: true });
      results.setAttribute("aria-busy", "true");
      replace(results, h("p", { class: "loading" }, t("kb.search.searching")));
      button.disabled = true;
      try {
        const min = Number(minScore.value);
        const out = await api("POST", "/api/v1/knowledge-search", {
          body: { query: q, knowledge_base_ids: [kb.id], search_mode: mode.value, top_k: Number(topK.value), min_score: Number.isFinite(min) ? Math.min(1, Math.max(0, min)) : 0.3, filter: node },
          signal: controller.signal,
        });
        drawResults(results, q, out);
      } catch (err) {
        if (err.name === "AbortError") return;
        replace(results, errorBlock(err));
      } finally {
        button.disabled = false;
        results.setAttribute("aria-busy", "false");
      }
    });
    return h("section", { class: "kb-search-section" }, h("h2", { class: "sr-only" }, t("kb.search.title")), form, results);
  }

  // The search's metadata filter (issue 44): conditions on the documents' fields (from
  // `GET /api/v1/metadata`, loaded once), each a chip, all of them combined with AND.
  function filterRow() {
    const OPS = ["eq", "ne", "lt", "lte", "gt", "gte", "in", "contains", "starts_with", "ends_with", "exists"];
    const BUILT_IN = new Set(["collection", "path", "indexed"]);
    let fields = [];
    const conditions = [];
    const opLabel = (op, type) => (type === "date" && ["lt", "lte", "gt", "gte"].includes(op) ? t(`kb.filter.op.date.${op}`) : t(`kb.filter.op.${op}`));
    const typeOf = (name) => {
      const f = fields.find((x) => x.field === name);
      const types = f?.types || [];
      return types.length === 1 ? types[0] : types.includes("list") ? "list" : "string";
    };
    const field = h("select", { id: "kb-filter-field" }, h("option", { value: "" }, t("kb.filter.any_field")));
    const op = h("select", { id: "kb-filter-op" });
    const list = h("datalist", { id: "kb-filter-values" });
    const value = h("input", { id: "kb-filter-value", type: "text", autocomplete: "off", list: "kb-filter-values" });
    const add = h("button", { class: "btn", type: "button" }, icon("plus"), t("kb.filter.add"));
    const chips = h("ul", { class: "kb-filter-chips", "aria-label": t("kb.filter.conditions") });
    const el = h(
      "fieldset",
      { class: "kb-filter", hidden: true, dataset: { testid: "search-filter" } },
      h("legend", {}, t("kb.filter.legend")),
      h("div", { class: "kb-search-opts" },
        h("div", { class: "field" }, h("label", { for: "kb-filter-field" }, t("kb.filter.field")), field),
        h("div", { class: "field" }, h("label", { for: "kb-filter-op" }, t("kb.filter.operator")), op),
        h("div", { class: "field" }, h("label", { for: "kb-filter-value" }, t("kb.filter.value")), value, list),
        h("div", { class: "field kb-filter-add" }, add)),
      chips,
    );
    const fillOps = () => {
      const type = typeOf(field.value);
      const keep = op.value;
      replace(op, OPS.map((o) => h("option", { value: o, selected: o === keep }, opLabel(o, type))));
      value.type = type === "date" ? "date" : type === "number" ? "number" : "text";
      const f = fields.find((x) => x.field === field.value);
      replace(list, (f?.top_values || []).map((v) => h("option", { value: String(v.value) }, t("kb.filter.value_count", { value: String(v.value), n: fmtNumber(v.count) }))));
      syncValue();
    };
    const syncValue = () => {
      value.disabled = op.value === "exists";
      value.placeholder = op.value === "in" ? t("kb.filter.in_hint") : "";
      if (op.value === "in") value.type = "text";
    };
    field.addEventListener("change", fillOps);
    op.addEventListener("change", () => {
      if (op.value !== "in") value.type = { date: "date", number: "number" }[typeOf(field.value)] || "text";
      syncValue();
    });
    const typed = (raw, type) => {
      raw = raw.trim();
      if (type === "number" && raw !== "" && Number.isFinite(Number(raw))) return Number(raw);
      if (type === "bool" && /^(true|false)$/i.test(raw)) return raw.toLowerCase() === "true";
      return raw;
    };
    const drawChips = () =>
      replace(
        chips,
        conditions.map((c, i) =>
          h("li", { class: "kb-filter-chip", dataset: { testid: "filter-chip" } },
            h("span", {}, c.text),
            h("button", {
              class: "btn btn-icon", type: "button", "aria-label": t("kb.filter.remove", { condition: c.text }), title: t("kb.filter.remove", { condition: c.text }),
              onclick: () => {
                conditions.splice(i, 1);
                drawChips();
                (chips.querySelector("button") || field).focus();
              },
            }, icon("close"))),
        ),
      );
    /** Adds the condition in the inputs as a chip; false when it is incomplete. */
    const commit = () => {
      if (!field.value) return false;
      const type = typeOf(field.value);
      const raw = value.value.trim();
      let node;
      if (op.value === "exists") node = { field: field.value, operator: "exists" };
      else if (!raw) return false;
      else if (op.value === "in") node = { field: field.value, operator: "in", value: raw.split(",").map((v) => typed(v, type)).filter((v) => v !== "") };
      else node = { field: field.value, operator: op.value, value: typed(raw, type === "list" ? "string" : type) };
      const shown = op.value === "exists" ? "" : ` ${raw}`;
      conditions.push({ node, text: `${field.value} ${opLabel(op.value, type)}${shown}` });
      value.value = "";
      drawChips();
      return true;
    };
    add.addEventListener("click", () => (commit() ? value.focus() : (field.value ? value : field).focus()));
    api("GET", `/api/v1/metadata?collection=${encodeURIComponent(kb.name)}&top=10`, { signal }).then(
      (out) => {
        // Shown only when the documents have a field of their own (their title is listed too).
        fields = (out?.fields || []).filter((f) => !BUILT_IN.has(f.field));
        if (!fields.some((f) => f.field !== "title")) return;
        field.append(...fields.map((f) => h("option", { value: f.field }, t("kb.filter.field_count", { field: f.field, n: fmtNumber(f.documents) }))));
        fillOps();
        el.hidden = false;
      },
      () => {},
    );
    return {
      el,
      commit,
      node: () => (conditions.length === 0 ? undefined : conditions.length === 1 ? conditions[0].node : { and: conditions.map((c) => c.node) }),
    };
  }

  // Words a search ignores, so they are not marked in results either.
  const STOP_WORDS = new Set(["a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "i", "in", "is", "it", "of", "on", "or", "the", "to", "was", "what", "when", "where", "which", "who", "why", "with"]);

  // An excerpt as text: Markdown's markers (headings, emphasis, code ticks, link targets,
  // table pipes) are not what a reader should see in a result.
  function plainExcerpt(text) {
    return text
      .replace(/^\s{0,3}#{1,6}\s+/gm, "")
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/(\*\*|__)(?=\S)(.+?)(?<=\S)\1/g, "$2")
      .replace(/`([^`]+)`/g, "$1")
      .replace(/^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/gm, "")
      .replace(/\s*\|\s*/g, " · ")
      .replace(/\n{2,}/g, "\n")
      .trim();
  }

  function drawResults(box, q, out) {
    const hits = out?.results || [];
    const note = out?.search_mode && out.search_mode !== "hybrid" ? t("kb.search.ran_as", { mode: t(`kb.search.match.${out.search_mode}`) }) : "";
    announce(tn("kb.search.count", { n: hits.length }));
    if (!hits.length) {
      replace(box, emptyState(t("kb.search.none")));
      return;
    }
    // Whole words only ("is" is not marked inside "persistent"), and no stop-words; a term
    // in a script written without spaces (Chinese, Japanese) is marked wherever it occurs.
    const terms = q.toLowerCase().split(/\s+/)
      .map((w) => w.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, ""))
      .filter((w) => w.length > 1 && !STOP_WORDS.has(w))
      .map((w) => {
        const escaped = w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        return /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}]/u.test(w)
          ? escaped : `(?<![\\p{L}\\p{N}])${escaped}(?![\\p{L}\\p{N}])`;
      });
    const re = terms.length ? new RegExp(`(${terms.join("|")})`, "giu") : null;
    const snippet = (text) => {
      const p = h("p", { class: "kb-hit-text" });
      text = plainExcerpt(text);
      if (!re) return replace(p, text);
      // split() keeps the captured match at odd indexes.
      text.split(re).forEach((part, i) => p.append(i % 2 ? h("mark", {}, part) : part));
      return p;
    };
    replace(
      box,
      h("p", { class: "muted" }, t("kb.search.summary", { n: hits.length, total: out.total_count ?? hits.length }), note ? ` · ${note}` : ""),
      h(
        "ol",
        { class: "kb-hits" },
        hits.map((hit) => {
          const line = Number(/:(\d+)$/.exec(hit.id || "")?.[1]) || null;
          const file = hit.knowledge_filename || hit.file;
          const href = `#/kb/${encodeURIComponent(kb.id)}?doc=${encodeURIComponent(hit.knowledge_id)}${hit.page ? `&page=${hit.page}` : ""}`;
          const cite = h(
            "a",
            {
              href,
              class: "kb-cite",
              dataset: { testid: "citation", page: hit.page ?? "", doc: hit.knowledge_id },
              onclick: (e) => {
                if (e.ctrlKey || e.metaKey || e.shiftKey || e.button) return;
                e.preventDefault();
                openPreview(hit.knowledge_id, { page: hit.page, line });
              },
            },
            hit.page ? t("kb.cite_page", { file, page: hit.page }) : file,
          );
          return h(
            "li",
            { class: "kb-hit card", dataset: { testid: "search-hit" } },
            h("div", { class: "kb-hit-head" }, icon("doc"), cite,
              h("span", { class: "badge badge-info", title: t("kb.search.score") }, t("kb.search.score_is", { score: Number(hit.score).toFixed(2) })),
              h("span", { class: "badge" }, t(`kb.search.match.${hit.match_type}`))),
            hit.knowledge_title && hit.knowledge_title !== file ? h("p", { class: "kb-hit-title muted" }, hit.knowledge_title) : null,
            // The document's own metadata fields, when the result carries them.
            hit.metadata && typeof hit.metadata === "object" && Object.keys(hit.metadata).length
              ? h("p", { class: "kb-hit-meta", dataset: { testid: "hit-metadata" } },
                Object.entries(hit.metadata).slice(0, 8).map(([k, v]) => h("span", { class: "badge" }, `${k}: ${Array.isArray(v) ? v.join(", ") : String(v)}`)))
              : null,
            snippet((hit.content || "").trim()),
          );
        }),
      ),
    );
  }

  // --- Preview drawer ---------------------------------------------------------------------
  let drawer = null;
  signal.addEventListener("abort", () => drawer && drawer.close());

  async function openPreview(docId, { page, line, tab } = {}) {
    if (drawer) drawer.close();
    const url = `${docsUrl()}/${encodeURIComponent(docId)}`;
    let doc = state.docs.find((d) => d.id === docId);
    try {
      doc = await api("GET", url, { signal });
    } catch (e) {
      if (signal.aborted) return;
      toast(e.status === 404 ? t("kb.pv.gone") : e.message, "error");
      return;
    }
    const previous = location.hash;
    const pages = doc.pages || null;
    let current = Math.min(Math.max(1, Number(page) || 1), pages || 1);
    const d = openDialog({
      title: doc.file_name,
      variant: "drawer",
      wide: true,
      onClose: () => {
        drawer = null;
        // Closed by leaving the page (Back, a nav link): the new address stays.
        if (!signal.aborted) history.replaceState(null, "", previous.replace(/\?.*$/, "") || `#/kb/${encodeURIComponent(kb.id)}`);
      },
    });
    drawer = d;
    d.dialog.classList.add("kb-drawer");
    d.dialog.dataset.testid = "preview-drawer";
    const previewUrl = `${url}/preview`;
    const isPdf = doc.mime === "application/pdf" || doc.format === "pdf";
    const isImage = /^image\//.test(doc.mime || "");

    // Page navigation (paged documents).
    const indicator = h("span", { class: "kb-pv-page", dataset: { testid: "preview-page" }, "aria-live": "polite" });
    const prev = h("button", { class: "btn btn-icon btn-small", type: "button", "aria-label": t("kb.pv.prev"), title: t("kb.pv.prev"), onclick: () => setPage(current - 1) }, "‹");
    const next = h("button", { class: "btn btn-icon btn-small", type: "button", "aria-label": t("kb.pv.next"), title: t("kb.pv.next"), onclick: () => setPage(current + 1) }, "›");
    const meta = h(
      "div",
      { class: "kb-pv-meta" },
      statusBadge(doc.status),
      h("span", { class: "muted" }, [(doc.format || "").toUpperCase(), fmtBytes(doc.size), pages ? tn("kb.n_pages", { n: pages }) : null].filter(Boolean).join(" · ")),
      pages ? h("div", { class: "kb-pv-nav", role: "group", "aria-label": t("kb.pv.pages") }, prev, indicator, next) : null,
      h("a", { class: "btn btn-small", href: previewUrl, download: doc.file_name }, t("kb.pv.download")),
    );
    const err =
      doc.status === "failed"
        ? h(
            "div",
            { class: "error-block kb-pv-error", role: "alert" },
            h("p", {}, t("kb.pv.failed", { reason: serverText(doc.error) || "—" })),
            canWrite
              ? h("button", { class: "btn btn-small", type: "button", onclick: () => (d.close(), retryDocs([doc])) }, icon("retry"), t("common.retry"))
              : null,
          )
        : null;

    // Shared data, fetched once per drawer.
    let mdP = null;
    let chunksP = null;
    // Markdown and chunks exist once the document is converted (from `indexing` on).
    const converted = !!doc.docid || ["indexing", "embedding", "ready"].includes(doc.status);
    const notConverted = () => Promise.reject(new ApiError(503, doc.status === "failed" ? t("kb.pv.failed", { reason: serverText(doc.error) || "—" }) : t("kb.pv.not_yet", { status: t(`kb.status.${doc.status}`) })));
    const markdown = () => (mdP ||= converted ? api("GET", `${url}/markdown`, { signal }) : notConverted());
    // The chunk list answers `chunking` beside its `data`: the size and overlap the document
    // was cut with, and where they come from (`document`, `knowledge_base` or `default`).
    let chunking = null;
    const chunks = () =>
      (chunksP ||= converted
        ? apiAnswer("GET", `${url}/chunks`, { signal }).then((out) => {
            chunking = out?.chunking || null;
            return Array.isArray(out?.data) ? out.data : [];
          })
        : notConverted());
    let frame = null;
    let mdBox = null;
    let chunkList = null;
    let activeTab = null;

    function setPage(n, { scroll = true } = {}) {
      current = pages ? Math.min(Math.max(1, n), pages) : 1;
      if (pages) {
        indicator.textContent = t("kb.pv.page_of", { page: current, pages });
        indicator.dataset.page = String(current);
        prev.disabled = current <= 1;
        next.disabled = current >= pages;
        history.replaceState(null, "", `#/kb/${encodeURIComponent(kb.id)}?doc=${encodeURIComponent(doc.id)}&page=${current}`);
      } else history.replaceState(null, "", `#/kb/${encodeURIComponent(kb.id)}?doc=${encodeURIComponent(doc.id)}`);
      if (frame) frame.src = `${previewUrl}#page=${current}`;
      if (chunkList) highlightChunks(scroll && activeTab === "chunks");
      if (mdBox && scroll && activeTab === "markdown") scrollMarkdown();
    }

    function scrollMarkdown() {
      if (!mdBox || !pages) return;
      const sections = [...mdBox.querySelectorAll("[data-page]")];
      const target = sections.filter((s) => Number(s.dataset.page) <= current).pop() || sections[0];
      if (target) target.scrollIntoView({ block: "start" });
      for (const s of sections) s.classList.toggle("is-current", s === target);
    }

    function highlightChunks(scroll) {
      let first = null;
      let cited = null;
      for (const li of chunkList.children) {
        const on = pages ? Number(li.dataset.page) === current : false;
        li.classList.toggle("is-current", on);
        if (on) li.setAttribute("aria-current", "true");
        else li.removeAttribute("aria-current");
        if (on && !first) first = li;
        if (line && !cited && Number(li.dataset.lineStart) <= line && line <= Number(li.dataset.lineEnd)) cited = li;
      }
      for (const li of chunkList.querySelectorAll(".is-cited")) li.classList.remove("is-cited");
      if (cited) cited.classList.add("is-cited");
      const target = cited && (cited.classList.contains("is-current") || !first) ? cited : first;
      if (scroll && target) target.scrollIntoView({ block: "start" });
    }

    const loadingP = () => h("p", { class: "loading" }, t("common.loading"));
    const unavailable = (e) => h("div", { class: "kb-pv-empty" }, h("p", {}, e.status === 503 ? t("kb.pv.not_ready") : t("kb.pv.load_failed")), h("p", { class: "muted" }, e.message));

    const tabItems = [
      {
        id: "original",
        label: t("kb.pv.original"),
        render(panel) {
          if (isPdf) {
            frame = h("iframe", { class: "kb-pv-frame", title: t("kb.pv.original_of", { name: doc.file_name }), src: `${previewUrl}#page=${current}`, dataset: { testid: "preview-frame" } });
            // Chromium's PDF viewer takes the focus right after it loads; give it back to the
            // drawer so Esc and the keyboard keep working (Tab still reaches the frame, and a
            // click in it later keeps the focus there).
            let loadedAt = 0;
            let lastFocus = null;
            frame.addEventListener("load", () => (loadedAt = performance.now()));
            d.dialog.addEventListener("focusin", (e) => e.target !== frame && (lastFocus = e.target));
            const onBlur = () => {
              if (document.activeElement !== frame || performance.now() - loadedAt > 1500) return;
              const back = lastFocus?.isConnected ? lastFocus : d.dialog.querySelector('[role="tab"][aria-selected="true"]');
              setTimeout(() => back?.focus(), 0);
            };
            window.addEventListener("blur", onBlur);
            signal.addEventListener("abort", () => window.removeEventListener("blur", onBlur));
            d.dialog.addEventListener("close", () => window.removeEventListener("blur", onBlur));
            panel.append(frame);
          } else if (isImage) {
            panel.append(h("img", { class: "kb-pv-image", src: previewUrl, alt: doc.file_name }));
          } else {
            panel.append(
              h("div", { class: "kb-pv-empty" },
                h("p", {}, t("kb.pv.no_inline", { type: (doc.format || ext(doc.file_name)).toUpperCase() })),
                h("a", { class: "btn", href: previewUrl, download: doc.file_name }, t("kb.pv.download_named", { name: doc.file_name }))),
            );
          }
        },
      },
      {
        id: "markdown",
        label: t("kb.pv.markdown"),
        async render(panel) {
          panel.append(loadingP());
          try {
            const [md, cs] = await Promise.all([markdown(), pages ? chunks().catch(() => []) : Promise.resolve([])]);
            mdBox = h("div", { class: "kb-md md" });
            for (const [p, text] of pageSections(md.markdown || "", cs)) {
              const section = h("section", { class: "kb-md-page", dataset: p ? { page: String(p) } : {} });
              if (p) section.append(h("p", { class: "kb-md-marker" }, t("kb.pv.page", { page: p })));
              section.append(renderMarkdown(text, { headingOffset: 2 }));
              mdBox.append(section);
            }
            if (!mdBox.textContent.trim()) mdBox.append(h("p", { class: "muted" }, t("kb.pv.empty_md")));
            replace(panel, mdBox);
            if (activeTab === "markdown") scrollMarkdown();
          } catch (e) {
            if (!signal.aborted) replace(panel, unavailable(e));
          }
        },
      },
      {
        id: "chunks",
        label: t("kb.pv.chunks"),
        render: (panel) => chunksTab(panel),
      },
    ];
    // --- Chunks: the list, and for writers the curation (edit, restore, disable, re-chunk) ---
    const chunkCount = h("p", { class: "muted kb-chunk-count" });
    // One polite line says what the last change did (role=status: read without moving focus).
    const chunkStatus = h("p", { class: "kb-chunk-status", role: "status", dataset: { testid: "chunk-status" } });
    const chunkBox = h("div", { class: "kb-chunk-box" });

    let rc = null;
    function chunksTab(panel) {
      rc = canWrite && converted ? reparseControl() : null;
      replace(
        panel,
        h("div", { class: "kb-chunk-bar" }, chunkCount, rc ? rc.button : null),
        rc ? rc.box : null,
        chunkStatus,
        chunkBox,
      );
      return loadChunkList();
    }

    async function loadChunkList() {
      replace(chunkBox, loadingP());
      try {
        const cs = await chunks();
        rc?.prefill(chunking);
        if (!cs.length) {
          chunkList = null;
          chunkCount.textContent = "";
          replace(chunkBox, h("p", { class: "muted" }, t("kb.pv.no_chunks")));
          return;
        }
        chunkList = h("ol", { class: "kb-chunks", "aria-label": t("kb.pv.chunk_list", { n: cs.length }) }, cs.map(chunkItem));
        chunkCount.textContent = tn("kb.pv.chunk_count", { n: fmtNumber(cs.length) });
        replace(chunkBox, chunkList);
        highlightChunks(activeTab === "chunks");
      } catch (e) {
        if (!signal.aborted && e.name !== "AbortError") replace(chunkBox, unavailable(e));
      }
    }

    /** Tells what a change did, in the status line: "Chunk 3 saved; re-embedded." */
    function chunkSaid(message, embedding) {
      const how = embedding === "done" ? t("kb.ch.embedded") : embedding === "queued" ? t("kb.ch.queued") : "";
      chunkStatus.textContent = how ? t("kb.ch.said_embedding", { what: message, embedding: how }) : t("kb.ch.said", { what: message });
    }

    /** One chunk, drawn from the API's chunk and drawn again from each PATCH's answer. */
    function chunkItem(first) {
      let c = first;
      let editing = false;
      let busy = false;
      const li = h("li", { class: "kb-chunk" });
      const chunkUrl = () => `${url}/chunks/${encodeURIComponent(c.id)}`;
      const uid = `kb-chunk-${String(c.id).replace(/[^\w-]/g, "_")}-${Math.random().toString(36).slice(2, 6)}`;
      let error = null;
      let editor = null;
      let buttons = [];

      function draw(focus) {
        const enabled = c.enabled !== false;
        const edited = !!c.edited;
        const n = c.index + 1;
        li.classList.toggle("is-disabled", !enabled);
        li.classList.toggle("is-edited", edited);
        Object.assign(li.dataset, {
          testid: "chunk",
          id: String(c.id),
          page: c.page ?? "",
          index: String(c.index),
          lineStart: String(c.line_start),
          lineEnd: String(c.line_end),
          enabled: String(enabled),
          edited: String(edited),
        });
        error = h("p", { class: "kb-chunk-error", id: `${uid}-error`, role: "alert", dataset: { testid: "chunk-error" } });
        const head = h(
          "div",
          { class: "kb-chunk-head" },
          c.page ? h("span", { class: "badge badge-info" }, t("kb.pv.page", { page: c.page })) : null,
          h("span", { class: "badge" }, t("kb.pv.chunk_n", { n })),
          edited ? h("span", { class: "badge badge-warn", dataset: { testid: "chunk-edited" } }, t("kb.ch.edited")) : null,
          enabled ? null : h("span", { class: "badge badge-danger", dataset: { testid: "chunk-disabled" } }, t("kb.ch.disabled")),
          h("span", { class: "muted" }, t("kb.pv.chunk_meta", { from: c.line_start, to: c.line_end, chars: fmtNumber([...(c.content || "")].length) })),
          c.heading ? h("span", { class: "kb-chunk-heading muted", dataset: { testid: "chunk-heading" } }, c.heading) : null,
        );
        const by =
          (edited || !enabled) && (c.edited_by || c.edited_at)
            ? h("p", { class: "kb-chunk-by muted" }, t(edited ? "kb.ch.edited_by" : "kb.ch.disabled_by", { who: c.edited_by || "—", date: fmtDate(c.edited_at) }))
            : null;
        let body;
        buttons = [];
        if (editing) {
          editor = h("textarea", {
            id: `${uid}-text`,
            class: "kb-chunk-editor",
            name: "content",
            rows: String(Math.min(18, Math.max(4, Math.ceil([...(c.content || "")].length / 70) + 1))),
            spellcheck: "true",
            "aria-describedby": `${uid}-error ${uid}-keys`,
            dataset: { testid: "chunk-editor" },
          });
          editor.value = editing.draft;
          editor.addEventListener("input", () => (editing.draft = editor.value));
          editor.addEventListener("keydown", (e) => {
            if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
              e.preventDefault();
              save();
            } else if (e.key === "Escape") {
              // Esc leaves the editor, not the drawer; a changed text is never thrown away by it.
              e.preventDefault();
              e.stopPropagation();
              if (editor.value === c.content) cancel();
            }
          });
          const saveBtn = h("button", { class: "btn btn-primary btn-small", type: "submit", dataset: { testid: "chunk-save" } }, t("common.save"));
          const cancelBtn = h("button", { class: "btn btn-small", type: "button", dataset: { testid: "chunk-cancel" }, onclick: () => cancel() }, t("common.cancel"));
          buttons = [saveBtn, cancelBtn];
          body = h(
            "form",
            { class: "kb-chunk-form", novalidate: true, onsubmit: (e) => (e.preventDefault(), save()) },
            h("label", { for: editor.id }, t("kb.ch.text_of", { n })),
            editor,
            h("span", { class: "hint", id: `${uid}-keys` }, t("kb.ch.keys")),
            error,
            h("div", { class: "row" }, saveBtn, cancelBtn),
          );
        } else {
          editor = null;
          body = h("pre", { class: "kb-chunk-text", dataset: { testid: "chunk-text" } }, c.content);
        }
        const original =
          edited && typeof c.original_content === "string"
            ? h(
                "details",
                { class: "kb-chunk-original", dataset: { testid: "chunk-original" } },
                h("summary", {}, t("kb.ch.original")),
                h("pre", { class: "kb-chunk-text" }, c.original_content),
              )
            : null;
        let actions = null;
        if (canWrite && !editing) {
          const edit = h("button", { class: "btn btn-small", type: "button", dataset: { testid: "chunk-edit", act: "edit" }, "aria-label": t("kb.ch.edit_n", { n }), onclick: () => startEdit() }, icon("edit"), t("common.edit"));
          const restore = edited
            ? h("button", { class: "btn btn-small", type: "button", dataset: { testid: "chunk-restore", act: "restore" }, "aria-label": t("kb.ch.restore_n", { n }), onclick: () => change({ content: null }, "restored", "edit") }, icon("retry"), t("kb.ch.restore"))
            : null;
          const toggle = h(
            "button",
            {
              class: `btn btn-small${enabled ? "" : " btn-primary"}`,
              type: "button",
              dataset: { testid: "chunk-toggle", act: "toggle" },
              "aria-label": t(enabled ? "kb.ch.disable_n" : "kb.ch.enable_n", { n }),
              onclick: () => change({ enabled: !enabled }, enabled ? "disabled_now" : "enabled_now", "toggle"),
            },
            t(enabled ? "kb.ch.disable" : "kb.ch.enable"),
          );
          buttons = [edit, restore, toggle].filter(Boolean);
          actions = h("div", { class: "kb-chunk-actions row" }, buttons, error);
        }
        li.replaceChildren(head, by || "", body, original || "", actions || "");
        if (!editing && !actions) li.append(error);
        for (const b of buttons) b.disabled = busy;
        if (focus === "editor" && editor) editor.focus();
        else if (focus) li.querySelector(`[data-act="${focus}"]`)?.focus();
      }

      function startEdit() {
        editing = { draft: c.content };
        draw("editor");
        editor.setSelectionRange(editor.value.length, editor.value.length);
      }
      function cancel() {
        editing = false;
        draw("edit");
      }
      function save() {
        if (!editing || busy) return;
        const text = editor.value;
        if (text === c.content) return cancel(); // nothing changed: no request
        change({ content: text }, "saved", "edit");
      }
      function setBusy(on) {
        busy = on;
        li.setAttribute("aria-busy", String(on));
        for (const b of buttons) b.disabled = on;
        if (editor) editor.readOnly = on;
      }

      /** PATCHes the chunk; draws it from the answer, or shows the API's refusal (keeping the text). */
      async function change(body, what, focus) {
        if (busy) return;
        setBusy(true);
        error.textContent = "";
        editor?.removeAttribute("aria-invalid");
        try {
          const out = await apiAnswer("PATCH", chunkUrl(), { body, signal });
          if (out?.data && typeof out.data === "object") c = out.data;
          chunksP = null; // the drawer's cached list is stale now: read again on next use
          mdP = null;
          editing = false;
          busy = false;
          draw(focus);
          chunkSaid(t(`kb.ch.${what}`, { n: c.index + 1 }), out?.embedding);
        } catch (e) {
          if (signal.aborted || e.name === "AbortError") return;
          setBusy(false);
          error.textContent = e.message;
          if (editor) {
            editor.setAttribute("aria-invalid", "true");
            editor.focus();
          }
        } finally {
          if (busy) setBusy(false);
        }
      }

      draw();
      return li;
    }

    /** "Re-chunk": the document cut again with another size and overlap (empty: the knowledge base's). */
    function reparseControl() {
      const id = (f) => `kb-rc-${String(doc.id).replace(/[^\w-]/g, "_")}-${f}`;
      const settings = kb.chunk_size ? t("kb.chunking_is", { size: kb.chunk_size, overlap: kb.chunk_overlap ?? 0 }) : t("kb.chunking_default");
      const input = (name, min) =>
        h("input", { id: id(name), name, type: "number", min, step: "1", inputmode: "numeric", "aria-describedby": `${id("hint")} ${id("error")}` });
      const size = input("chunk_size", "100");
      const overlap = input("chunk_overlap", "0");
      size.max = "20000";
      size.placeholder = kb.chunk_size ? String(kb.chunk_size) : t("kb.form.chunk_default");
      overlap.placeholder = kb.chunk_size ? String(kb.chunk_overlap ?? 0) : t("kb.form.overlap_default");
      /** The document's own size and overlap (none when it follows the knowledge base's). */
      const prefill = (c) => {
        const mine = c && c.from === "document" ? c : null;
        size.value = mine?.chunk_size != null ? String(mine.chunk_size) : "";
        overlap.value = mine?.chunk_overlap != null ? String(mine.chunk_overlap) : "";
      };
      const error = h("p", { class: "form-error", id: id("error"), role: "alert", dataset: { testid: "reparse-error" } });
      const result = h("p", { class: "kb-rc-result", role: "status", dataset: { testid: "reparse-result" } });
      const submit = h("button", { class: "btn btn-primary btn-small", type: "submit", dataset: { testid: "reparse-submit" } }, t("kb.rc.submit"));
      const form = h(
        "form",
        { id: id("form"), class: "kb-form kb-rc-form", novalidate: true, hidden: true, dataset: { testid: "reparse-form" }, "aria-labelledby": id("title") },
        h("h3", { id: id("title") }, t("kb.rc.title")),
        h("p", { class: "hint", id: id("hint") }, t("kb.rc.hint", { settings })),
        h(
          "div",
          { class: "kb-form-row" },
          h("div", { class: "field" }, h("label", { for: size.id }, t("kb.form.chunk_size")), size),
          h("div", { class: "field" }, h("label", { for: overlap.id }, t("kb.form.chunk_overlap")), overlap),
        ),
        error,
        h("div", { class: "row" }, submit),
      );
      const button = h(
        "button",
        { class: "btn btn-small", type: "button", "aria-expanded": "false", "aria-controls": form.id, dataset: { testid: "reparse-open" } },
        icon("refresh"),
        t("kb.rc.open"),
      );
      button.addEventListener("click", () => {
        form.hidden = !form.hidden;
        button.setAttribute("aria-expanded", String(!form.hidden));
        if (!form.hidden) size.focus();
      });
      const fail = (message) => {
        error.textContent = message;
        for (const el of [size, overlap]) el.removeAttribute("aria-invalid");
        const key = message ? fieldOf(message) : null;
        const el = key === "chunk_size" ? size : key === "chunk_overlap" ? overlap : null;
        if (el) {
          el.setAttribute("aria-invalid", "true");
          el.focus();
        }
      };
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        const body = {};
        if (size.value.trim()) body.chunk_size = Number(size.value);
        if (overlap.value.trim()) body.chunk_overlap = Number(overlap.value);
        fail("");
        result.textContent = "";
        submit.disabled = true;
        try {
          const out = await api("POST", `${url}/reparse`, { body, signal });
          const n = Number(out?.chunks ?? 0);
          const kept = Number(out?.edits_kept ?? 0);
          const lost = Number(out?.edits_unmatched ?? 0);
          result.textContent = [
            tn("kb.rc.done", { n: fmtNumber(n), kept: tn("kb.rc.kept", { n: fmtNumber(kept) }) }),
            lost ? tn("kb.rc.unmatched", { n: fmtNumber(lost) }) : null,
            out?.embedding === "done" ? t("kb.rc.embedded") : out?.embedding === "queued" ? t("kb.rc.queued") : null,
          ].filter(Boolean).join(" ");
          chunksP = null;
          mdP = null;
          chunkStatus.textContent = "";
          await loadChunkList();
          poll.kick(); // the table's chunk count
        } catch (err) {
          if (signal.aborted || err.name === "AbortError") return;
          fail(err.message);
        } finally {
          submit.disabled = false;
        }
      });
      return { button, box: h("div", { class: "kb-rc" }, form, result), prefill };
    }

    const firstTab = tab || (isPdf || isImage ? "original" : "markdown");
    activeTab = firstTab;
    const set = tabs(
      tabItems,
      {
        label: t("kb.pv.tabs"),
        onChange: (id) => {
          activeTab = id;
          // Panels render on first view; later views scroll to the current page.
          requestAnimationFrame(() => {
            if (id === "markdown") scrollMarkdown();
            if (id === "chunks" && chunkList) highlightChunks(true);
          });
        },
      },
    );
    d.body.append(meta, err || "", set.el);
    set.select(firstTab, true); // focus the tab, not the PDF viewer (Esc must reach the drawer)
    setPage(current, { scroll: true });
  }

  /** [page, text] sections of a document's Markdown, cut where each page's first chunk starts. */
  function pageSections(md, cs) {
    const paged = cs.filter((c) => c.page);
    if (!paged.length) return [[null, md]];
    const lines = md.split("\n");
    const starts = new Map();
    for (const c of paged) starts.set(c.page, Math.min(starts.get(c.page) ?? Infinity, c.line_start));
    const order = [...starts.entries()].sort((a, b) => a[0] - b[0]);
    const out = [];
    let last = 0;
    order.forEach(([p, startLine], i) => {
      const from = i === 0 ? 0 : Math.max(last, startLine - 1);
      const to = i + 1 < order.length ? Math.max(from, order[i + 1][1] - 1) : lines.length;
      out.push([p, lines.slice(from, to).join("\n")]);
      last = to;
    });
    return out;
  }

  // --- Deep link ------------------------------------------------------------------------
  const deepDoc = query?.get("doc");
  // `&line=N` (a wiki page's source) marks the chunk holding that line on the Chunks tab.
  const deepLine = Number(query?.get("line")) || undefined;
  if (deepDoc) openPreview(deepDoc, { page: Number(query.get("page")) || 1, line: deepLine, tab: query.get("tab") || undefined });
}

/** Files (with relative paths) from a drop; folders are walked. */
async function filesFromDrop(dt) {
  const items = [];
  let folder = false;
  const entries = [...(dt?.items || [])].map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
  if (!entries.length || entries.some((e) => !e)) {
    return { items: [...(dt?.files || [])].map((f) => ({ file: f, path: f.name })), folder: false };
  }
  const walk = async (entry, prefix) => {
    if (entry.isFile) {
      const file = await new Promise((res, rej) => entry.file(res, rej));
      items.push({ file, path: prefix + file.name });
    } else if (entry.isDirectory) {
      folder = true;
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
        if (!batch.length) break;
        for (const e of batch) await walk(e, `${prefix}${entry.name}/`);
      }
    }
  };
  for (const e of entries) await walk(e, "");
  return { items, folder };
}
