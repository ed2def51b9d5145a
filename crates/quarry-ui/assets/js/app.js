// Quarry's web UI shell: session, i18n, theme, routing, and the small helpers every page
// uses (DOM building, API calls with CSRF, uploads with progress, SSE over POST, dialogs,
// toasts, live regions). Pages are ES modules loaded on first visit (see ROUTES); each
// exports `render(ctx)`. No framework, no build step: what is here is what the browser runs.

const CSRF_COOKIE = "quarry_csrf";
const LANGS = ["en", "zh-CN"];

/** Pages: hash route → module, its strings, and the nav label key. */
const ROUTES = [
  { path: "kb", module: "./kb.js", ns: ["kb"], css: "kb", nav: "nav.kb" },
  { path: "tools", module: "./tools.js", ns: ["tools"], css: "tools", nav: "nav.tools" },
  { path: "hub", module: "./hub.js", ns: ["tools"], css: "tools", nav: "nav.hub" },
  { path: "policies", module: "./policies.js", ns: ["approvals"], css: "approvals", nav: "nav.policies" },
  // The inbox of tool calls held for a person's approval; its link counts the pending ones.
  { path: "approvals", module: "./approvals.js", ns: ["approvals"], css: "approvals", nav: "nav.approvals", badge: "approvals" },
  { path: "chat", module: "./chat.js", ns: ["chat"], css: "chat", nav: "nav.chat" },
  { path: "access", module: "./access.js", ns: ["access"], css: "access", nav: "nav.access" },
  // What the knowledge is asked and cannot answer, and usage over time (the space's admins).
  { path: "insight", module: "./insight.js", ns: ["insight"], css: "insight", nav: "nav.insight" },
  // The OAuth consent page: reached from /oauth/authorize, never from the nav.
  { path: "authorize", module: "./authorize.js", ns: ["oauth"], css: "access", nav: "oauth.page_title", hidden: true },
];

export const app = {
  /** `GET /ui/session`: {mode, user, space, spaces, role, read_only, can_login}. */
  session: null,
  lang: "en",
  /** The space requests act in (`X-Space-ID`), when the caller has several. */
  space: null,
};

// ---------------------------------------------------------------------------------------
// i18n: one JSON file per namespace, {"en": {...}, "zh-CN": {...}}, loaded once.

const strings = { en: {}, "zh-CN": {} };
const loadedNs = new Set();

export async function loadStrings(...namespaces) {
  const todo = namespaces.filter((ns) => !loadedNs.has(ns));
  await Promise.all(
    todo.map(async (ns) => {
      const r = await fetch(`/assets/i18n/${ns}.json`, { credentials: "same-origin" });
      if (!r.ok) throw new Error(`cannot load strings '${ns}': HTTP ${r.status}`);
      const all = await r.json();
      for (const lang of LANGS) Object.assign(strings[lang], all[lang] || {});
      loadedNs.add(ns);
      serverTemplates = null;
    }),
  );
}

/** The string `key` in the current language, `{name}` placeholders filled from `vars`. */
export function t(key, vars) {
  let s = strings[app.lang][key];
  if (s === undefined) {
    console.error(`untranslated string: ${key} (${app.lang})`);
    s = strings.en[key] ?? key;
  }
  if (vars) s = s.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m));
  return s;
}

// ---------------------------------------------------------------------------------------
// Server messages. The server speaks English (conversion reasons, warnings, validation
// errors). i18n/server.json is the one table of the messages the page knows: each "en" entry
// is the server's exact wording with {placeholders}, matched whole; the page's language gets
// its translation, with nested messages translated in turn ("page 3"). Anything
// else is shown as the server sent it.

/** What a placeholder may match: numbers and page lists ("3", "3–9, 12"), a format's name
 * ("PDF"); any other placeholder is text. */
const NUMBER_SLOT = "(\\d[\\d,.–-]*(?:, \\d[\\d.–-]*)*)";
const SLOT_PATTERNS = { n: NUMBER_SLOT, limit: NUMBER_SLOT, page: NUMBER_SLOT, count: NUMBER_SLOT, size: NUMBER_SLOT, list: NUMBER_SLOT, format: "([A-Z]{2,4})" };
/** Placeholders whose value is itself a server message ("page 3"); names stay as they are. */
const NESTED_SLOTS = new Set(["pages", "detail"]);
let serverTemplates = null;

function compileServerTemplates() {
  const compiled = [];
  for (const [key, en] of Object.entries(strings.en)) {
    if (!key.startsWith("server.")) continue;
    const slots = [];
    let literal = 0;
    const source = en
      .split(/(\{\w+\})/)
      .map((part) => {
        const slot = /^\{(\w+)\}$/.exec(part);
        if (!slot) {
          literal += part.length;
          return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        }
        slots.push(slot[1]);
        return SLOT_PATTERNS[slot[1]] || "(.+?)";
      })
      .join("");
    compiled.push({ key, slots, literal, re: new RegExp(`^${source}$`, "s") });
  }
  // The most specific first: "page {page} could not be read ({detail})" before "page {list}".
  return compiled.sort((a, b) => b.literal - a.literal);
}

/** `text` from the server in the page's language when i18n/server.json knows it. */
export function serverText(text, depth = 0) {
  if (typeof text !== "string" || !text || app.lang === "en" || text.length > 1000 || depth > 2) return text;
  serverTemplates ??= compileServerTemplates();
  for (const { key, slots, re } of serverTemplates) {
    const m = re.exec(text);
    if (!m) continue;
    const vars = {};
    slots.forEach((slot, i) => (vars[slot] = NESTED_SLOTS.has(slot) ? serverText(m[i + 1], depth + 1) : m[i + 1]));
    return t(key, vars);
  }
  if (depth > 0) return text;
  // Several reasons joined ("a.xyz: …; b.xyz: …"), or one behind a file name ("a.xyz: …").
  const parts = text.split("; ");
  if (parts.length > 1) {
    const translated = parts.map((p) => serverText(p));
    return translated.some((p, i) => p !== parts[i]) ? translated.join("；") : text;
  }
  const cut = text.indexOf(": ");
  if (cut > 0) {
    const reason = text.slice(cut + 2);
    const translated = serverText(reason, 1);
    if (translated !== reason) return `${text.slice(0, cut)}: ${translated}`;
  }
  return text;
}

function pickLang() {
  const saved = localStorage.getItem("quarry.lang");
  if (LANGS.includes(saved)) return saved;
  for (const l of navigator.languages || [navigator.language || "en"]) {
    if (/^zh\b/i.test(l)) return "zh-CN";
    if (/^en\b/i.test(l)) return "en";
  }
  return "en";
}

export function setLang(lang) {
  localStorage.setItem("quarry.lang", lang);
  app.lang = lang;
  document.documentElement.lang = lang;
  const skip = document.querySelector(".skip");
  if (skip) skip.textContent = t("chrome.skip");
  renderChrome();
  route();
}

// ---------------------------------------------------------------------------------------
// Theme: light, dark, or the system's (prefers-color-scheme).

function applyTheme(theme) {
  const root = document.documentElement;
  if (theme === "light" || theme === "dark") root.dataset.theme = theme;
  else delete root.dataset.theme;
}

export function setTheme(theme) {
  localStorage.setItem("quarry.theme", theme);
  applyTheme(theme);
}

// ---------------------------------------------------------------------------------------
// DOM

/**
 * `h("button", {class: "btn", onclick: f, "aria-label": "…"}, "text", child)`.
 * Attributes: `class`, `text`, `on<event>` handlers, `dataset` and `style` (objects), booleans set or
 * omitted, anything else via setAttribute. Children: strings become text nodes (never HTML),
 * null/false are skipped, arrays are flattened.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    // CSP forbids style attributes in markup; CSSOM properties are allowed.
    else if (k === "style") Object.assign(el.style, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked" || k === "selected" || k === "disabled" || k === "multiple") el[k] = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** An inline SVG icon from a path list (decorative: aria-hidden). */
export function icon(name) {
  const paths = ICONS[name] || ICONS.dot;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "18");
  svg.setAttribute("height", "18");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon");
  for (const d of paths) {
    const p = document.createElementNS("http://www.w3.org/2000/svg", "path");
    p.setAttribute("d", d);
    svg.append(p);
  }
  return svg;
}

const ICONS = {
  dot: ["M12 10a2 2 0 1 1 0 4 2 2 0 0 1 0-4z"],
  plus: ["M12 5v14M5 12h14"],
  trash: ["M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3"],
  retry: ["M4 12a8 8 0 0 1 14-5l2 2M20 4v5h-5M20 12a8 8 0 0 1-14 5l-2-2M4 20v-5h5"],
  close: ["M6 6l12 12M18 6 6 18"],
  upload: ["M12 16V4M7 9l5-5 5 5M4 20h16"],
  search: ["M11 4a7 7 0 1 1 0 14 7 7 0 0 1 0-14zM16 16l5 5"],
  copy: ["M9 9h11v11H9zM5 15H4V4h11v1"],
  sun: ["M12 8a4 4 0 1 1 0 8 4 4 0 0 1 0-8zM12 2v2M12 20v2M2 12h2M20 12h2M5 5l1.5 1.5M17.5 17.5 19 19M5 19l1.5-1.5M17.5 6.5 19 5"],
  moon: ["M20 15A8 8 0 0 1 9 4a8 8 0 1 0 11 11z"],
  edit: ["M4 20h4L19 9l-4-4L4 16zM14 6l4 4"],
  send: ["M4 12 20 4l-6 16-3-7z"],
  refresh: ["M20 11a8 8 0 0 0-15-3M4 4v4h4M4 13a8 8 0 0 0 15 3M20 20v-4h-4"],
  doc: ["M6 3h8l4 4v14H6zM14 3v4h4"],
  logout: ["M15 4h4v16h-4M10 8l-4 4 4 4M6 12h10"],
  lock: ["M6 11h12v9H6zM8 11V8a4 4 0 0 1 8 0v3"],
};

/** Removes every child of `el` and appends `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// ---------------------------------------------------------------------------------------
// Announcements: toasts (visible) and live regions (screen readers).

export function announce(message, { assertive = false } = {}) {
  const region = document.getElementById(assertive ? "live-assertive" : "live-polite");
  if (!region) return;
  // Clearing first makes the same message be read again.
  region.textContent = "";
  setTimeout(() => (region.textContent = message), 30);
}

export function toast(message, kind = "info") {
  const box = document.getElementById("toasts");
  const el = h("div", { class: `toast toast-${kind}` }, message);
  box.append(el);
  setTimeout(() => el.remove(), kind === "error" ? 8000 : 4000);
}

// ---------------------------------------------------------------------------------------
// API

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return "";
}

/** Headers every API request carries: the CSRF token and the chosen space. */
export function apiHeaders(extra) {
  const headers = { Accept: "application/json", "X-Quarry-CSRF": cookie(CSRF_COOKIE), ...extra };
  if (app.space) headers["X-Space-ID"] = app.space;
  return headers;
}

/** The message of an error body in any of the server's shapes. */
function errorMessage(body, status) {
  if (body && typeof body === "object") {
    if (typeof body.detail === "string") return serverText(body.detail);
    if (typeof body.message === "string") return serverText(body.message);
    if (body.error && typeof body.error.message === "string") return serverText(body.error.message);
    if (typeof body.error === "string") return serverText(body.error);
  }
  return `HTTP ${status}`;
}

/**
 * `api("GET", "/api/v1/knowledge-bases", {query: {page: 1}})` → the `data` of a
 * `{"success", "data"}` envelope (or the whole JSON body when there is no envelope).
 * Throws ApiError with the server's message. A 401 sends the user to the login screen.
 */
export async function api(method, path, { body, query, signal, headers } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === null || v === "") continue;
      for (const item of Array.isArray(v) ? v : [v]) q.append(k, item);
    }
    const s = q.toString();
    if (s) url += (url.includes("?") ? "&" : "?") + s;
  }
  const init = { method, credentials: "same-origin", signal, headers: apiHeaders(headers) };
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const r = await fetch(url, init);
  const text = await r.text();
  let json = null;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  if (!r.ok) {
    if (r.status === 401 && !path.startsWith("/ui/")) sessionExpired();
    throw new ApiError(r.status, errorMessage(json, r.status) || text, json?.error_code || json?.code);
  }
  if (json && typeof json === "object" && "success" in json && "data" in json) {
    if (json.success === false) throw new ApiError(r.status, errorMessage(json, r.status));
    return json.data;
  }
  return json ?? text;
}

/**
 * Uploads `form` with XMLHttpRequest (fetch has no upload progress): `onProgress(loaded,
 * total)`. Resolves to the envelope's data; rejects with ApiError.
 */
export function upload(url, form, { onProgress, signal } = {}) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    xhr.withCredentials = true;
    for (const [k, v] of Object.entries(apiHeaders())) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => onProgress && onProgress(e.loaded, e.lengthComputable ? e.total : 0);
    xhr.onload = () => {
      let json = null;
      try {
        json = JSON.parse(xhr.responseText);
      } catch {
        json = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(json && "data" in json ? json.data : json);
      else {
        if (xhr.status === 401) sessionExpired();
        reject(new ApiError(xhr.status, errorMessage(json, xhr.status), json?.error_code));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, t("error.network")));
    xhr.onabort = () => reject(new ApiError(0, t("error.aborted"), "aborted"));
    if (signal) signal.addEventListener("abort", () => xhr.abort());
    xhr.send(form);
  });
}

/**
 * POSTs `body` as JSON and reads the `text/event-stream` answer: `onEvent(type, data)` for
 * each event (`data` parsed as JSON; seed 003's `{"type", "data"}` envelope unwrapped).
 * Resolves when the stream ends; a non-2xx answer rejects with ApiError before any event.
 */
export async function streamPost(path, body, onEvent, { signal } = {}) {
  const r = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    signal,
    headers: apiHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(body),
  });
  if (!r.ok) {
    let json = null;
    try {
      json = await r.json();
    } catch {
      json = null;
    }
    if (r.status === 401) sessionExpired();
    throw new ApiError(r.status, errorMessage(json, r.status), json?.error_code);
  }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const raw = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      let type = "message";
      const data = [];
      for (const line of raw.split(/\r?\n/)) {
        if (line.startsWith(":")) continue;
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      let payload = data.join("\n");
      try {
        payload = JSON.parse(payload);
        if (payload && typeof payload === "object" && "type" in payload && "data" in payload) {
          type = payload.type;
          payload = payload.data;
        }
      } catch {
        /* plain text data */
      }
      onEvent(type, payload);
    }
    if (done) break;
  }
}

// ---------------------------------------------------------------------------------------
// Dialogs (native <dialog>: focus trap, Esc, inert background)

/**
 * Opens a modal dialog. `variant: "drawer"` slides in from the side. Returns
 * {dialog, body, footer, close}; `onClose` runs once when it closes by any means.
 */
export function openDialog({ title, variant = "modal", onClose, label, wide = false }) {
  const titleId = `dlg-${Math.random().toString(36).slice(2)}`;
  const body = h("div", { class: "dialog-body" });
  const footer = h("div", { class: "dialog-footer" });
  const closeBtn = h(
    "button",
    { class: "btn btn-icon", type: "button", "aria-label": t("common.close"), onclick: () => close() },
    icon("close"),
  );
  const dialog = h(
    "dialog",
    { class: `dialog dialog-${variant}${wide ? " dialog-wide" : ""}`, "aria-labelledby": titleId, "aria-label": label },
    h("div", { class: "dialog-head" }, h("h2", { id: titleId }, title), closeBtn),
    body,
    footer,
  );
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    if (dialog.open) dialog.close();
    dialog.remove();
    if (onClose) onClose();
  };
  dialog.addEventListener("close", close);
  // Escape: close at once, so `onClose` has run by the time the dialog is hidden
  // (the native `close` event only comes a task later).
  dialog.addEventListener("cancel", (e) => {
    e.preventDefault();
    close();
  });
  dialog.addEventListener("click", (e) => {
    if (e.target === dialog) close(); // click on the backdrop
  });
  document.body.append(dialog);
  dialog.showModal();
  return { dialog, body, footer, close };
}

/** Asks a yes/no question; resolves true when confirmed. */
export function confirmDialog(message, { confirmLabel, danger = false } = {}) {
  return new Promise((resolve) => {
    let answer = false;
    const d = openDialog({ title: t("common.confirm"), onClose: () => resolve(answer) });
    d.body.append(h("p", {}, message));
    d.footer.append(
      h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")),
      h(
        "button",
        {
          class: `btn ${danger ? "btn-danger" : "btn-primary"}`,
          type: "button",
          onclick: () => {
            answer = true;
            d.close();
          },
        },
        confirmLabel || t("common.ok"),
      ),
    );
  });
}

/** A button that copies `text()` (a string or a function returning one). */
export function copyButton(text, label) {
  const btn = h("button", { class: "btn btn-small", type: "button" }, icon("copy"), label || t("common.copy"));
  btn.addEventListener("click", async () => {
    const value = typeof text === "function" ? text() : text;
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      // Clipboard API refused (no permission): select a temporary field instead.
      const area = h("textarea", { class: "sr-only", "aria-hidden": "true" });
      area.value = value;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    announce(t("common.copied"));
    toast(t("common.copied"), "success");
  });
  return btn;
}

/**
 * Accessible tabs: `tabs([{id, label, render(panel)}], {onChange})`. Arrow keys move
 * between tabs. Returns {el, select(id)}.
 */
export function tabs(items, { label, onChange } = {}) {
  const list = h("div", { class: "tabs", role: "tablist", "aria-label": label });
  const panels = h("div", { class: "tab-panels" });
  const uid = Math.random().toString(36).slice(2);
  const buttons = [];
  const select = (id, focus = false) => {
    for (const { item, btn, panel } of buttons) {
      const on = item.id === id;
      btn.setAttribute("aria-selected", on ? "true" : "false");
      btn.tabIndex = on ? 0 : -1;
      panel.hidden = !on;
      if (on) {
        if (!panel.dataset.rendered) {
          panel.dataset.rendered = "1";
          item.render(panel);
        }
        if (focus) btn.focus();
      }
    }
    if (onChange) onChange(id);
  };
  items.forEach((item, i) => {
    const btn = h(
      "button",
      {
        class: "tab",
        role: "tab",
        type: "button",
        id: `tab-${uid}-${item.id}`,
        "aria-controls": `panel-${uid}-${item.id}`,
        onclick: () => select(item.id),
        onkeydown: (e) => {
          const n = items.length;
          const next = e.key === "ArrowRight" ? (i + 1) % n : e.key === "ArrowLeft" ? (i - 1 + n) % n : -1;
          if (next >= 0) {
            e.preventDefault();
            select(items[next].id, true);
          }
        },
      },
      item.label,
    );
    const panel = h("div", {
      class: "tab-panel",
      role: "tabpanel",
      id: `panel-${uid}-${item.id}`,
      "aria-labelledby": `tab-${uid}-${item.id}`,
      tabindex: "0",
      hidden: true,
    });
    buttons.push({ item, btn, panel });
    list.append(btn);
    panels.append(panel);
  });
  if (items.length) select(items[0].id);
  return { el: h("div", { class: "tabs-wrap" }, list, panels), select };
}

// ---------------------------------------------------------------------------------------
// Formatting

/** A date from an ISO string or Unix seconds/milliseconds, in the UI's language. */
export function fmtDate(v) {
  if (v === null || v === undefined || v === "") return "—";
  const d = typeof v === "number" ? new Date(v < 1e12 ? v * 1000 : v) : new Date(v);
  if (Number.isNaN(d.getTime())) return String(v);
  return d.toLocaleString(app.lang, { dateStyle: "medium", timeStyle: "short" });
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KB", "MB", "GB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i && v < 10 ? 1 : 0)} ${units[i]}`;
}

export function fmtNumber(n) {
  return Number(n || 0).toLocaleString(app.lang);
}

/** A page heading with optional actions on the right. */
export function pageHeader(title, ...actions) {
  return h("div", { class: "page-head" }, h("h1", {}, title), h("div", { class: "page-actions" }, actions));
}

/**
 * A table in its scrolling wrapper: `dataTable({caption, columns, rows, attrs})`. The caption
 * names it for screen readers; `columns` are header labels (null ones are skipped).
 */
export function dataTable({ caption, columns, rows, attrs }) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      attrs || {},
      h("caption", { class: "sr-only" }, caption),
      h("thead", {}, h("tr", {}, columns.filter((c) => c !== null && c !== false).map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows),
    ),
  );
}

/** An empty state: a sentence and an optional action. */
export function emptyState(message, action) {
  return h("div", { class: "empty" }, h("p", {}, message), action || null);
}

/** An inline error block for a failed load, with a retry button. */
export function errorBlock(err, retry) {
  return h(
    "div",
    { class: "error-block", role: "alert" },
    h("p", {}, err?.message || String(err)),
    retry ? h("button", { class: "btn", type: "button", onclick: retry }, t("common.retry")) : null,
  );
}

// ---------------------------------------------------------------------------------------
// Session and login

function sessionExpired() {
  if (app.session && app.session.mode === "open") return;
  app.session = null;
  showLogin(t("login.expired"));
}

async function loadSession() {
  try {
    app.session = await api("GET", "/ui/session");
  } catch (e) {
    if (e.status === 401) return null;
    throw e;
  }
  const saved = localStorage.getItem("quarry.space");
  const spaces = app.session.spaces || [];
  app.space = spaces.some((s) => s.id === saved) ? saved : app.session.space?.id || null;
  return app.session;
}

/** Reloads the session (after spaces or memberships change) and redraws the top bar. */
export async function refreshSession() {
  if (await loadSession()) renderChrome();
}

function showLogin(message) {
  renderChrome();
  const main = document.getElementById("main");
  const input = h("input", {
    id: "login-token",
    name: "token",
    type: "password",
    autocomplete: "current-password",
    required: true,
    spellcheck: "false",
    placeholder: "qk_…",
  });
  const error = h("p", { class: "form-error", id: "login-error", role: "alert" }, message || "");
  const button = h("button", { class: "btn btn-primary", type: "submit" }, t("login.submit"));
  const form = h(
    "form",
    { class: "card login", "aria-labelledby": "login-title" },
    h("h1", { id: "login-title" }, t("login.title")),
    h("p", { class: "muted" }, t("login.help")),
    h("label", { for: "login-token" }, t("login.token")),
    input,
    error,
    button,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    error.textContent = "";
    try {
      await api("POST", "/ui/login", { body: { token: input.value.trim() } });
      input.value = "";
      await start();
    } catch (err) {
      error.textContent = err.status === 401 || err.status === 403 ? t("login.invalid", { reason: err.message }) : err.message;
      button.disabled = false;
      input.focus();
    }
  });
  replace(main, form);
  input.focus();
  api("GET", "/ui/config")
    .then((cfg) => {
      if (!form.isConnected) return;
      // Identity providers first: a person signs in with their company account; the token
      // field stays for scripts' owners and admins.
      const providers = cfg.providers || [];
      if (providers.length) {
        const back = location.pathname + location.search + location.hash;
        const links = providers.map((p) =>
          h(
            "a",
            {
              class: "btn btn-primary login-provider",
              id: `login-provider-${p.name}`,
              href: `${p.start}?return_to=${encodeURIComponent(back)}`,
            },
            p.title,
          ),
        );
        form.querySelector("h1").after(
          h("div", { class: "login-providers" }, ...links),
          h("p", { class: "muted login-or" }, t("login.or_token")),
        );
        form.querySelector("p.muted:not(.login-or)")?.remove();
        button.classList.remove("btn-primary");
        links[0].focus();
      }
      // Local mode works without a token: offer to leave a stale session instead.
      if (cfg.mode !== "open") return;
      form.append(
        h(
          "button",
          {
            id: "login-local",
            class: "btn btn-link",
            type: "button",
            onclick: async () => {
              await api("POST", "/ui/logout");
              await start();
            },
          },
          t("login.local"),
        ),
      );
    })
    .catch(() => {});
}

async function logout() {
  let out = null;
  let failed = null;
  try {
    out = await api("POST", "/ui/logout");
  } catch (err) {
    failed = err;
  }
  app.session = null;
  // A web session made with an identity provider: end the provider's session too.
  if (out?.logout_url) {
    location.assign(out.logout_url);
    return;
  }
  location.hash = "";
  showLogin();
  if (failed) throw failed;
}

// ---------------------------------------------------------------------------------------
// Chrome (nav, language, theme, account) and routing

function renderChrome() {
  const nav = document.getElementById("nav");
  const current = parseHash().page;
  replace(
    nav,
    app.session
      ? ROUTES.filter((r) => !r.hidden).map((r) =>
          h(
            "a",
            { href: `#/${r.path}`, class: "nav-link", "aria-current": r.path === current ? "page" : null, dataset: { route: r.path } },
            t(r.nav),
            r.badge ? navBadge(r.badge) : null,
          ),
        )
      : [],
  );
  const tools = document.getElementById("topbar-tools");
  const lang = h(
    "select",
    {
      id: "lang-select",
      "aria-label": t("chrome.language"),
      onchange: (e) => setLang(e.target.value),
    },
    h("option", { value: "en", selected: app.lang === "en" }, "English"),
    h("option", { value: "zh-CN", selected: app.lang === "zh-CN" }, "简体中文"),
  );
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === "dark"
    : matchMedia("(prefers-color-scheme: dark)").matches;
  const theme = h(
    "button",
    {
      id: "theme-toggle",
      class: "btn btn-icon",
      type: "button",
      "aria-label": dark ? t("chrome.theme_light") : t("chrome.theme_dark"),
      title: dark ? t("chrome.theme_light") : t("chrome.theme_dark"),
      onclick: () => {
        setTheme(dark ? "light" : "dark");
        renderChrome();
      },
    },
    icon(dark ? "sun" : "moon"),
  );
  const parts = [lang, theme];
  const s = app.session;
  if (s) {
    const spaces = s.spaces || [];
    if (spaces.length > 1) {
      parts.unshift(
        h(
          "select",
          {
            id: "space-select",
            "aria-label": t("chrome.space"),
            onchange: (e) => {
              app.space = e.target.value;
              localStorage.setItem("quarry.space", app.space);
              route();
              watchPending();
            },
          },
          spaces.map((sp) => h("option", { value: sp.id, selected: sp.id === app.space }, sp.name)),
        ),
      );
    }
    parts.push(
      h(
        "span",
        { class: "who", title: s.mode === "open" ? t("chrome.local_mode_help") : "" },
        s.user ? s.user.name : t("chrome.local_owner"),
      ),
    );
    if (s.user) {
      parts.push(
        h(
          "button",
          { id: "logout", class: "btn btn-icon", type: "button", "aria-label": t("chrome.logout"), title: t("chrome.logout"), onclick: logout },
          icon("logout"),
        ),
      );
    }
  }
  replace(tools, parts);
}

// ---------------------------------------------------------------------------------------
// Nav badges: a count beside a link (the approvals waiting for a person).

const navCounts = {};

function navBadge(name) {
  const n = navCounts[name] || 0;
  if (!n) return null;
  const shown = n > 99 ? "99+" : String(n);
  return h(
    "span",
    { class: "nav-badge", dataset: { testid: `nav-badge-${name}` } },
    h("span", { class: "badge badge-warn", "aria-hidden": "true", style: { marginLeft: ".35rem" } }, shown),
    h("span", { class: "sr-only" }, ` ${t(`nav.${name}_pending`, { n: shown })}`),
  );
}

/** Sets the count beside the nav link of `name` (0 hides it); pages that know it call this. */
export function setNavCount(name, n) {
  n = Number(n) || 0;
  if (navCounts[name] === n) return;
  navCounts[name] = n;
  const link = document.querySelector(`#nav a[data-route="${name}"]`);
  if (!link) return;
  link.querySelector(".nav-badge")?.remove();
  const badge = navBadge(name);
  if (badge) link.append(badge);
}

const PENDING_POLL_MS = 10_000;
let pendingTimer = null;

/** Counts the pending approvals now and every 10 s while the app is open and visible
 * (`?status=pending&limit=100`, one small request). A server without the route (404), or a
 * caller it refuses, stops the polling until the next sign-in. */
function watchPending() {
  clearInterval(pendingTimer);
  const poll = async () => {
    if (!app.session || document.hidden) return;
    let r;
    try {
      r = await fetch("/api/v1/approvals?status=pending&limit=100", { credentials: "same-origin", headers: apiHeaders() });
    } catch {
      return; // the server is away for a moment: try again on the next tick
    }
    if (r.status === 401 || r.status === 403 || r.status === 404) {
      clearInterval(pendingTimer);
      return;
    }
    if (!r.ok) return;
    try {
      const body = await r.json();
      // `{"success", "data": [approval…]}` (a list envelope), or `data: {"items": […]}`.
      const items = Array.isArray(body?.data) ? body.data : body?.data?.items;
      if (Array.isArray(items)) setNavCount("approvals", items.filter((a) => a.status === "pending").length);
    } catch {
      clearInterval(pendingTimer);
    }
  };
  pendingTimer = setInterval(poll, PENDING_POLL_MS);
  poll();
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [pathPart, queryPart] = raw.split("?");
  const segments = pathPart.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: segments[0] || "kb", params: segments.slice(1), query: new URLSearchParams(queryPart || "") };
}

let current = null; // {controller}

async function route() {
  if (!app.session) return;
  const { page, params, query } = parseHash();
  const def = ROUTES.find((r) => r.path === page) || ROUTES[0];
  if (current) current.controller.abort();
  const controller = new AbortController();
  current = { controller };
  renderChrome();
  const main = document.getElementById("main");
  main.setAttribute("aria-busy", "true");
  try {
    const [mod] = await Promise.all([import(def.module), loadStrings(...def.ns), loadCss(def.css)]);
    if (controller.signal.aborted) return;
    const root = h("div", { class: `page page-${def.path}` });
    replace(main, root);
    document.title = `${t(def.nav)} · Quarry`;
    await mod.render({ root, params, query, signal: controller.signal, session: app.session });
  } catch (e) {
    if (controller.signal.aborted || e.name === "AbortError") return;
    console.warn(e);
    replace(main, errorBlock(e, () => route()));
  } finally {
    if (!controller.signal.aborted) main.removeAttribute("aria-busy");
  }
}

const loadedCss = new Map();

/** Adds `/assets/css/<name>.css` once; resolves when it has loaded (no flash of unstyled page).
 * Pages call it for the parts they load later (kb.js: the sources). */
export function loadCss(name) {
  if (!name) return Promise.resolve();
  if (!loadedCss.has(name)) {
    loadedCss.set(
      name,
      new Promise((resolve) => {
        const link = h("link", { rel: "stylesheet", href: `/assets/css/${name}.css` });
        link.addEventListener("load", resolve);
        link.addEventListener("error", resolve);
        document.head.append(link);
      }),
    );
  }
  return loadedCss.get(name);
}

/** Goes to `#/path` (re-renders even when the hash is unchanged). */
export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

let started = false;

async function start() {
  const session = await loadSession();
  if (!session) {
    showLogin();
    return;
  }
  renderChrome();
  watchPending();
  if (!started) {
    started = true;
    window.addEventListener("hashchange", () => {
      route();
      document.getElementById("main").focus({ preventScroll: true });
    });
  }
  await route();
}

async function boot() {
  app.lang = pickLang();
  document.documentElement.lang = app.lang;
  applyTheme(localStorage.getItem("quarry.theme"));
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => renderChrome());
  try {
    await loadStrings("core", "server");
    const skip = document.querySelector(".skip");
    if (skip) {
      skip.textContent = t("chrome.skip");
      // The hash is the router's: move focus without navigating.
      skip.addEventListener("click", (e) => {
        e.preventDefault();
        document.getElementById("main").focus();
      });
    }
    await start();
  } catch (e) {
    console.warn(e);
    replace(document.getElementById("main"), errorBlock(e, () => location.reload()));
  }
}

boot();
