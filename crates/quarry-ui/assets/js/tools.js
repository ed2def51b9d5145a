// `#/tools`: MCP servers (register stdio / Streamable HTTP / legacy SSE upstreams, health,
// per-tool switches, schemas), built-in tools (switches) and custom HTTP tools (a
// schema-aware editor and a "Test" form generated from the tool's input schema).
//
// Routes (crates/quarry-server/src/hub_api.rs): /api/v1/mcp/servers[/{id}[/toggle|/refresh|
// /tools|/oauth]], /api/v1/hub/tools/{pkg.tool}/toggle, /api/v1/tools[/builtin[/{name}/toggle]],
// /api/v1/tools/{id}[/toggle|/test]. Secret values (env, headers) never come back from the
// API: lists carry their names only, and so does this page.
//
// Also exports the small helpers hub.js shares (JSON tree, schema view, plurals, switches).

import {
  t,
  h,
  icon,
  replace,
  announce,
  toast,
  api,
  openDialog,
  confirmDialog,
  copyButton,
  tabs,
  fmtDate,
  fmtNumber,
  serverText,
  pageHeader,
  emptyState,
  errorBlock,
  dataTable,
} from "./app.js";
import { renderMarkdown } from "./markdown.js";

/**
 * A tool's description, rendered as the Markdown it is written in (built-in tools and many
 * upstreams write `**When to use:**` and lists); markdown.js builds DOM, never HTML.
 */
export function toolDescription(text, cls = "") {
  return h("div", { class: `tl-md ${cls}`.trim() }, renderMarkdown(text, { headingOffset: 3 }));
}

// ---------------------------------------------------------------------------------------
// Shared helpers (also used by hub.js)

let seq = 0;
/** A page-unique element id. */
export function uid(prefix) {
  seq += 1;
  return `${prefix}-${seq}`;
}

/** `key_one` / `key_other` by `n` (English needs both; Chinese strings are the same). */
export function plural(key, n, vars) {
  return t(n === 1 ? `${key}_one` : `${key}_other`, { n: fmtNumber(n), ...vars });
}

function isAbort(e) {
  return e && (e.name === "AbortError" || e.code === "aborted");
}

/**
 * A labelled switch: `<label class="switch"><input type=checkbox role=switch> text</label>`.
 * `name` is the accessible name (it includes the visible text); `onToggle(checked)` may be
 * async: the switch is disabled while it runs and flips back when it throws.
 */
export function switchInput({ checked, name, text, onToggle, disabled, testid }) {
  const input = h("input", {
    type: "checkbox",
    role: "switch",
    checked,
    disabled,
    "aria-label": name,
    "data-testid": testid,
  });
  const label = h("label", { class: "switch" }, input, h("span", { class: "switch-text" }, text));
  input.addEventListener("change", async () => {
    const want = input.checked;
    input.disabled = true;
    try {
      await onToggle(want);
    } catch (e) {
      if (!isAbort(e)) {
        input.checked = !want;
        toast(e.message, "error");
        announce(e.message, { assertive: true });
      }
    } finally {
      input.disabled = !!disabled;
    }
  });
  return { el: label, input };
}

/** A collapsible, pretty JSON tree (objects and arrays are <details>; leaves are typed). */
export function jsonTree(value, { openDepth = 3 } = {}) {
  const keyEl = (key) => (key === null ? null : h("span", { class: "jt-key" }, `${key}: `));
  const node = (key, v, depth) => {
    if (v !== null && typeof v === "object") {
      const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
      if (!entries.length) return h("div", { class: "jt-leaf" }, keyEl(key), Array.isArray(v) ? "[]" : "{}");
      const meta = Array.isArray(v)
        ? plural("tools.json.items", entries.length)
        : plural("tools.json.keys", entries.length);
      return h(
        "details",
        { class: "jt-node", open: depth < openDepth },
        h("summary", {}, keyEl(key), h("span", { class: "jt-meta" }, Array.isArray(v) ? `[ ${meta} ]` : `{ ${meta} }`)),
        h(
          "div",
          { class: "jt-children" },
          entries.map(([k, x]) => node(k, x, depth + 1)),
        ),
      );
    }
    const kind = v === null ? "null" : typeof v;
    return h("div", { class: "jt-leaf" }, keyEl(key), h("span", { class: `jt-${kind}` }, JSON.stringify(v)));
  };
  return h("div", { class: "json-tree" }, node(null, value, 0));
}

/** "Input schema" as a collapsed <details> holding the tree and a copy button. */
export function schemaView(schema, { label } = {}) {
  let body = null;
  const details = h(
    "details",
    { class: "schema-view" },
    h("summary", {}, label || t("tools.schema.input")),
  );
  // Built on first open: a server can have dozens of tools with large schemas.
  details.addEventListener("toggle", () => {
    if (!details.open || body) return;
    body = h(
      "div",
      { class: "schema-body" },
      h("div", { class: "row schema-actions" }, copyButton(() => JSON.stringify(schema ?? {}, null, 2), t("tools.schema.copy"))),
      jsonTree(schema ?? {}),
    );
    details.append(body);
  });
  return details;
}

/** Closes a dialog when the page it belongs to goes away (navigation aborts `signal`). */
function closeOnLeave(d, signal) {
  const close = () => d.close();
  signal.addEventListener("abort", close, { once: true });
  d.dialog.addEventListener("close", () => signal.removeEventListener("abort", close), { once: true });
}

/** A field: label + control (+ hint), `.field` column. */
function field(labelText, control, { hint, required } = {}) {
  const id = control.id || uid("f");
  control.id = id;
  const hintEl = hint ? h("span", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  if (required) control.required = true;
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, labelText, required ? h("span", { class: "tl-req", "aria-hidden": "true" }, " *") : null),
    control,
    hintEl,
  );
}

// ---------------------------------------------------------------------------------------
// Page

const TABS = ["servers", "builtin", "custom"];

export async function render({ root, query, signal, session }) {
  const readOnly = !!session?.read_only;
  root.append(pageHeader(t("tools.title")));
  if (readOnly) root.append(h("p", { class: "tl-note", role: "note" }, t("tools.read_only")));
  const initial = TABS.includes(query.get("tab")) ? query.get("tab") : "servers";
  let firstRendered = false;
  const ctx = {
    signal,
    readOnly,
    session,
    markReady(panel, id) {
      panel.dataset.ready = "true";
      if (!firstRendered && id === initial) {
        firstRendered = true;
        root.dataset.ready = "true";
      }
    },
  };
  const tb = tabs(
    [
      { id: "servers", label: t("tools.tab.servers"), render: (p) => serversTab(p, ctx) },
      { id: "builtin", label: t("tools.tab.builtin"), render: (p) => builtinTab(p, ctx) },
      { id: "custom", label: t("tools.tab.custom"), render: (p) => customTab(p, ctx) },
    ],
    {
      label: t("tools.tabs_label"),
      onChange: (id) => {
        // Keep the tab in the address without re-routing (replaceState fires no hashchange).
        const hash = id === "servers" ? "#/tools" : `#/tools?tab=${id}`;
        if (location.hash !== hash) history.replaceState(null, "", hash);
      },
    },
  );
  tb.el.querySelectorAll('[role="tab"]').forEach((b) => {
    b.dataset.testid = `tab-${b.id.split("-").pop()}`;
  });
  root.append(tb.el);
  if (initial !== "servers") tb.select(initial);
}

// ---------------------------------------------------------------------------------------
// MCP servers

const STATUS = {
  ready: { cls: "tl-badge-ok", key: "tools.status.ready" },
  connecting: { cls: "badge-info", key: "tools.status.connecting" },
  error: { cls: "badge-danger", key: "tools.status.error" },
  disabled: { cls: "", key: "tools.status.disabled" },
  idle: { cls: "", key: "tools.status.idle" },
  auth_required: { cls: "badge-warn", key: "tools.status.auth_required" },
};

/** How `last_error` starts while an upstream waits for a person to sign in (OAuth). */
const SIGN_IN_REQUIRED = "sign-in required";

/**
 * Whether a server waits for a sign-in: `auth_required`, or reconnecting (`connecting`, the
 * supervisor retries now and then) with the sign-in still missing, so the button stays put.
 */
function needsSignIn(info) {
  if (info.status === "auth_required") return true;
  return (
    info.status === "connecting" &&
    typeof info.last_error === "string" &&
    info.last_error.startsWith(SIGN_IN_REQUIRED) &&
    info.oauth?.state !== "signed_in"
  );
}

/** Waits `ms`, or less when `signal` aborts. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

function statusBadge(status) {
  const s = STATUS[status] || { cls: "", key: null };
  return h(
    "span",
    { class: `badge ${s.cls}`, "data-testid": "server-status", "data-status": status },
    s.key ? t(s.key) : status,
  );
}

const TRANSPORTS = {
  stdio: "tools.transport.stdio",
  http: "tools.transport.http",
  sse: "tools.transport.sse",
};

function serversTab(panel, ctx) {
  const { signal } = ctx;
  const cards = new Map(); // id → card
  const list = h("div", { class: "tl-servers", "aria-live": "off" });
  const addBtn = h(
    "button",
    {
      class: "btn btn-primary",
      type: "button",
      disabled: ctx.readOnly,
      onclick: () => registerDialog(ctx, state),
    },
    icon("plus"),
    t("tools.servers.add"),
  );
  const reloadBtn = h(
    "button",
    { class: "btn", type: "button", onclick: () => state.reload() },
    icon("refresh"),
    t("tools.servers.reload"),
  );
  replace(
    panel,
    h(
      "div",
      { class: "tl-section-head" },
      h("h2", {}, t("tools.servers.title")),
      h("div", { class: "row" }, reloadBtn, addBtn),
    ),
    h("p", { class: "muted tl-intro" }, t("tools.servers.intro")),
    list,
  );

  let timer = null;
  let loading = null;
  let loadedOnce = false;
  const state = {
    /** Fetches the list and updates cards in place (expanded panels survive). */
    reload() {
      if (loading) return loading;
      loading = (async () => {
        try {
          const servers = await api("GET", "/api/v1/mcp/servers", { signal });
          apply(servers);
        } catch (e) {
          if (isAbort(e)) return;
          if (!loadedOnce) replace(list, errorBlock(e, () => state.reload()));
          else toast(e.message, "error");
        } finally {
          loading = null;
        }
      })();
      return loading;
    },
    update(info) {
      const c = cards.get(info.id);
      if (c) c.update(info);
      schedule();
    },
    remove(id) {
      const c = cards.get(id);
      if (c) c.el.remove();
      cards.delete(id);
      if (!cards.size) replace(list, emptyState(t("tools.servers.empty")));
    },
  };

  const apply = (servers) => {
    if (!servers.length) {
      cards.clear();
      replace(list, emptyState(t("tools.servers.empty")));
    } else {
      if (!cards.size) list.replaceChildren();
      const seen = new Set();
      for (const info of servers) {
        seen.add(info.id);
        let c = cards.get(info.id);
        if (c) c.update(info);
        else {
          c = serverCard(info, ctx, state);
          cards.set(info.id, c);
          list.append(c.el);
        }
      }
      for (const [id, c] of cards) {
        if (!seen.has(id)) {
          c.el.remove();
          cards.delete(id);
        }
      }
    }
    if (!loadedOnce) {
      loadedOnce = true;
      ctx.markReady(panel, "servers");
    }
    schedule();
  };

  /** Polls while a server is connecting (fast) or failing and retrying (slow). */
  const schedule = () => {
    clearTimeout(timer);
    timer = null;
    if (signal.aborted) return;
    const statuses = [...cards.values()].map((c) => c.info.status);
    const delay = statuses.includes("connecting") ? 1500 : statuses.includes("error") ? 8000 : 0;
    if (delay) timer = setTimeout(() => state.reload(), delay);
  };
  signal.addEventListener("abort", () => clearTimeout(timer));

  replace(list, h("p", { class: "loading" }, t("common.loading")));
  state.reload();
}

function serverCard(initial, ctx, state) {
  const { signal } = ctx;
  let info = initial;
  const headId = uid("srv");
  const toolsId = uid("srv-tools");
  const title = h("h3", { id: headId, class: "tl-server-name" }, info.name);
  const badges = h("div", { class: "row tl-badges" });
  const meta = h("div", { class: "tl-server-meta" });
  const errorBox = h("div", { class: "tl-last-error", "data-testid": "server-last-error", hidden: true });
  const toolsPanel = h("div", { class: "tl-server-tools", id: toolsId, hidden: true });
  let toolsLoaded = false;
  const toggleTools = h("button", {
    class: "btn btn-small",
    type: "button",
    "aria-expanded": "false",
    "aria-controls": toolsId,
    onclick: () => {
      const open = toggleTools.getAttribute("aria-expanded") !== "true";
      toggleTools.setAttribute("aria-expanded", String(open));
      toolsPanel.hidden = !open;
      if (open && !toolsLoaded) loadTools();
      renderToolsButton();
    },
  });
  const renderToolsButton = () => {
    const open = toggleTools.getAttribute("aria-expanded") === "true";
    replace(
      toggleTools,
      open ? t("tools.servers.hide_tools") : plural("tools.servers.show_tools", info.tool_count),
    );
  };
  const sw = switchInput({
    checked: info.enabled,
    name: t("tools.servers.enabled_name", { name: info.name }),
    text: t("common.enabled"),
    disabled: ctx.readOnly,
    testid: "server-enabled",
    onToggle: async (on) => {
      announce(on ? t("tools.servers.enabling", { name: info.name }) : t("tools.servers.disabling", { name: info.name }));
      const updated = await api("PATCH", `/api/v1/mcp/servers/${encodeURIComponent(info.id)}/toggle`, {
        body: { enabled: on },
        signal,
      });
      state.update(updated);
      if (toolsLoaded) loadTools();
      announce(t("tools.servers.now_status", { name: updated.name, status: statusText(updated.status) }));
    },
  });
  const refreshBtn = h(
    "button",
    {
      class: "btn btn-small",
      type: "button",
      "aria-label": t("tools.servers.refresh_name", { name: info.name }),
      title: t("tools.servers.refresh_help"),
      onclick: async () => {
        refreshBtn.disabled = true;
        refreshBtn.setAttribute("aria-busy", "true");
        announce(t("tools.servers.refreshing", { name: info.name }));
        try {
          const updated = await api("POST", `/api/v1/mcp/servers/${encodeURIComponent(info.id)}/refresh`, { signal });
          state.update(updated);
          if (toolsLoaded) await loadTools();
          const msg = t("tools.servers.refreshed", { name: updated.name, tools: plural("tools.count", updated.tool_count) });
          toast(msg, "success");
          announce(msg);
        } catch (e) {
          if (!isAbort(e)) toast(e.message, "error");
        } finally {
          refreshBtn.disabled = false;
          refreshBtn.removeAttribute("aria-busy");
        }
      },
    },
    icon("refresh"),
    t("common.refresh"),
  );
  const deleteBtn = h(
    "button",
    {
      class: "btn btn-small btn-danger",
      type: "button",
      disabled: ctx.readOnly,
      "aria-label": t("tools.servers.delete_name", { name: info.name }),
      onclick: async () => {
        const yes = await confirmDialog(t("tools.servers.delete_confirm", { name: info.name }), {
          danger: true,
          confirmLabel: t("common.delete"),
        });
        if (!yes) return;
        try {
          await api("DELETE", `/api/v1/mcp/servers/${encodeURIComponent(info.id)}`, { signal });
          state.remove(info.id);
          const msg = t("tools.servers.deleted", { name: info.name });
          toast(msg, "success");
          announce(msg);
        } catch (e) {
          if (!isAbort(e)) toast(e.message, "error");
        }
      },
    },
    icon("trash"),
    t("common.delete"),
  );
  const auth = signInSection(() => info, ctx, state);

  const el = h(
    "article",
    { class: "card tl-server", "aria-labelledby": headId, "data-testid": `server-${info.name}`, "data-server-id": info.id },
    h("div", { class: "tl-server-head" }, h("div", { class: "tl-server-title" }, title, badges), sw.el),
    meta,
    errorBox,
    auth.el,
    h("div", { class: "row tl-server-actions" }, toggleTools, refreshBtn, deleteBtn),
    toolsPanel,
  );

  const update = (next) => {
    const before = info.status;
    info = next;
    title.textContent = info.name;
    sw.input.checked = info.enabled;
    replace(
      badges,
      statusBadge(info.status),
      h("span", { class: "badge" }, t(TRANSPORTS[info.transport_type] || "tools.transport.other")),
      h("span", { class: "badge badge-info", "data-testid": "server-tool-count" }, plural("tools.count", info.usable_tool_count ?? info.tool_count)),
    );
    const target = [info.config, ...(info.args || [])].join(" ");
    const secretNames = info.transport_type === "stdio" ? info.env || [] : info.headers || [];
    replace(
      meta,
      h(
        "dl",
        { class: "tl-dl" },
        h("dt", {}, info.transport_type === "stdio" ? t("tools.servers.command") : t("tools.servers.url")),
        h("dd", {}, h("code", { class: "tl-config" }, target)),
        h("dt", {}, t("tools.servers.package")),
        h("dd", {}, h("code", {}, info.package), info.category ? h("span", { class: "muted" }, ` · ${info.category}`) : null),
        secretNames.length
          ? [
              h("dt", {}, info.transport_type === "stdio" ? t("tools.servers.env") : t("tools.servers.headers")),
              h(
                "dd",
                {},
                secretNames.map((n) => h("code", { class: "tl-secret-name" }, n)),
                h("span", { class: "muted" }, ` ${t("tools.servers.values_hidden")}`),
              ),
            ]
          : null,
        info.server_name
          ? [
              h("dt", {}, t("tools.servers.upstream")),
              h(
                "dd",
                {},
                `${info.server_name}${info.server_version ? ` ${info.server_version}` : ""}`,
                info.protocol_version ? h("span", { class: "muted" }, ` · MCP ${info.protocol_version}`) : null,
              ),
            ]
          : null,
        info.restarts
          ? [h("dt", {}, t("tools.servers.restarts")), h("dd", {}, fmtNumber(info.restarts))]
          : null,
        h("dt", {}, t("common.updated")),
        h("dd", {}, fmtDate(info.updated_at)),
      ),
    );
    // A server waiting for a sign-in says why in its sign-in part, not as a failure.
    const waits = needsSignIn(info);
    if (info.last_error && !waits) {
      errorBox.hidden = false;
      replace(
        errorBox,
        h("strong", {}, t("tools.servers.last_error")),
        " ",
        h("span", { class: "tl-error-text" }, info.last_error),
        info.stderr_tail && info.stderr_tail.length
          ? h(
              "details",
              { class: "tl-stderr" },
              h("summary", {}, t("tools.servers.stderr", { n: info.stderr_tail.length })),
              h("pre", {}, info.stderr_tail.join("\n")),
            )
          : null,
      );
    } else {
      errorBox.hidden = true;
      errorBox.replaceChildren();
    }
    el.classList.toggle("tl-server-failed", info.status === "error");
    el.classList.toggle("tl-server-auth", waits);
    auth.update(info);
    renderToolsButton();
    if (before && before !== info.status) {
      announce(t("tools.servers.now_status", { name: info.name, status: statusText(info.status) }));
      // Tools appear with the first discovery.
      if (toolsLoaded && info.status === "ready") loadTools();
    }
  };

  const loadTools = async () => {
    toolsLoaded = true;
    if (!toolsPanel.childElementCount) replace(toolsPanel, h("p", { class: "loading" }, t("common.loading")));
    try {
      const tools = await api("GET", `/api/v1/mcp/servers/${encodeURIComponent(info.id)}/tools`, { signal });
      renderTools(tools);
    } catch (e) {
      if (!isAbort(e)) replace(toolsPanel, errorBlock(e, () => loadTools()));
    }
  };

  const renderTools = (tools) => {
    if (!tools.length) {
      replace(
        toolsPanel,
        emptyState(info.status === "error" ? t("tools.servers.no_tools_error") : t("tools.servers.no_tools")),
      );
      return;
    }
    replace(
      toolsPanel,
      info.enabled ? null : h("p", { class: "tl-note" }, t("tools.servers.disabled_note")),
      h(
        "ul",
        { class: "tl-tool-list", "aria-label": t("tools.servers.tools_of", { name: info.name }) },
        tools.map((tool) => toolItem(tool, ctx)),
      ),
    );
  };

  update(initial);
  // `update` announces changes; the first render is not a change.
  return {
    el,
    update,
    get info() {
      return info;
    },
  };
}

function statusText(status) {
  return STATUS[status] ? t(STATUS[status].key) : status;
}

/** How long "Sign in" watches for the sign-in to finish (the started sign-in lapses then too). */
const SIGN_IN_WAIT_MS = 10 * 60 * 1000;
const SIGN_IN_POLL_MS = 2000;

/**
 * A server card's sign-in (OAuth) part, drawn by `update(info)` from the server's row.
 *
 * While the server waits for a sign-in (`auth_required`): why, and "Sign in", which starts one
 * (`POST …/oauth`), opens the authorization server's page (`authorization_url`) in a new window,
 * and reads the server every 2 s (for 10 minutes at most, until the page changes) until it
 * waits no more. Once signed in (`oauth.state === "signed_in"`): who signed in where, when the
 * access token expires, and "Sign out" (`DELETE …/oauth`, after a confirmation). Refusals of
 * both show beside the buttons, in the API's words.
 */
function signInSection(getInfo, ctx, state) {
  const { signal } = ctx;
  const oauthPath = () => `/api/v1/mcp/servers/${encodeURIComponent(getInfo().id)}/oauth`;
  const detail = h("p", { class: "tl-auth-detail muted", "data-testid": "server-oauth-detail" });
  const signInBtn = h(
    "button",
    {
      class: "btn btn-primary",
      type: "button",
      disabled: ctx.readOnly,
      "data-testid": "server-sign-in",
      onclick: () => startSignIn(),
    },
    icon("lock"),
    t("tools.oauth.sign_in"),
  );
  // What the sign-in is doing: starting, waiting for the other window.
  const progress = h("span", { class: "tl-auth-status", role: "status", "aria-live": "polite", "data-testid": "server-oauth-status" });
  const need = h(
    "div",
    { class: "tl-auth-need", hidden: true },
    h("p", { class: "tl-auth-intro" }, t("tools.oauth.required")),
    detail,
    h("div", { class: "row tl-auth-actions" }, signInBtn, progress),
  );
  const who = h("p", { class: "tl-auth-who", "aria-live": "polite", "data-testid": "server-oauth" });
  const signOutBtn = h(
    "button",
    {
      class: "btn btn-small btn-danger",
      type: "button",
      disabled: ctx.readOnly,
      "data-testid": "server-sign-out",
      onclick: () => signOut(),
    },
    icon("logout"),
    t("tools.oauth.sign_out"),
  );
  const signed = h("div", { class: "row tl-auth-signed", hidden: true }, who, signOutBtn);
  const sealed = h("p", { class: "tl-note tl-auth-sealed", role: "note", hidden: true }, t("tools.oauth.sealed"));
  const error = h("p", { class: "form-error", role: "alert", "data-testid": "server-oauth-error" });
  const el = h("div", { class: "tl-auth", "data-testid": "server-auth", hidden: true }, need, signed, sealed, error);

  // The current sign-in's number: a newer one stops the polling of an older one.
  let run = 0;
  // After "Sign out", focus goes to "Sign in" once it is back (the button pressed is gone).
  let focusSignIn = false;

  const showError = (message) => {
    error.textContent = message;
    el.hidden = false;
  };

  const startSignIn = async () => {
    const mine = ++run;
    const name = getInfo().name;
    error.textContent = "";
    signInBtn.disabled = true;
    signInBtn.setAttribute("aria-busy", "true");
    progress.textContent = t("tools.oauth.starting", { name });
    let started;
    try {
      started = await api("POST", oauthPath(), { signal });
    } catch (e) {
      if (!isAbort(e)) {
        progress.textContent = "";
        showError(e.message);
      }
      return;
    } finally {
      signInBtn.disabled = !!ctx.readOnly;
      signInBtn.removeAttribute("aria-busy");
    }
    if (run !== mine || signal.aborted) return;
    const url = started.authorization_url;
    // `noopener`: the authorization server's page gets no handle on this one. It also makes
    // window.open answer null whether or not a popup blocker stopped it, so the link to
    // click is always offered.
    window.open(url, "_blank", "noopener");
    replace(
      progress,
      t("tools.oauth.waiting"),
      " ",
      t("tools.oauth.no_window"),
      " ",
      h("a", { href: url, target: "_blank", rel: "noopener noreferrer", "data-testid": "server-oauth-link" }, t("tools.oauth.open_link")),
    );
    await watch(mine);
  };

  /** Reads the server every 2 s until it waits for a sign-in no more. */
  const watch = async (mine) => {
    const deadline = Date.now() + SIGN_IN_WAIT_MS;
    const id = getInfo().id;
    while (run === mine && !signal.aborted) {
      if (Date.now() >= deadline) {
        progress.textContent = "";
        showError(t("tools.oauth.timed_out"));
        return;
      }
      await sleep(SIGN_IN_POLL_MS, signal);
      if (run !== mine || signal.aborted) return;
      let now;
      try {
        now = await api("GET", `/api/v1/mcp/servers/${encodeURIComponent(id)}`, { signal });
      } catch (e) {
        if (isAbort(e) || (e && e.status === 404)) return; // left the page, or deleted
        continue; // a passing failure: ask again
      }
      if (run !== mine) return;
      state.update(now);
      if (!needsSignIn(now)) {
        progress.textContent = "";
        if (now.oauth?.state === "signed_in") {
          error.textContent = "";
          const msg = t("tools.oauth.done", { name: now.name });
          toast(msg, "success");
          announce(msg);
        }
        return;
      }
    }
  };

  const signOut = async () => {
    const { name } = getInfo();
    const yes = await confirmDialog(t("tools.oauth.sign_out_confirm", { name }), {
      danger: true,
      confirmLabel: t("tools.oauth.sign_out"),
    });
    if (!yes) return;
    error.textContent = "";
    signOutBtn.disabled = true;
    signOutBtn.setAttribute("aria-busy", "true");
    try {
      const updated = await api("DELETE", oauthPath(), { signal });
      focusSignIn = true;
      state.update(updated);
      const msg = t("tools.oauth.signed_out", { name: updated.name });
      toast(msg, "success");
      announce(msg);
    } catch (e) {
      if (isAbort(e)) return;
      showError(e.message);
      // Signed out meanwhile (in another tab, by another admin): show the server as it is now.
      if (e.status === 404) state.reload();
    } finally {
      signOutBtn.disabled = !!ctx.readOnly;
      signOutBtn.removeAttribute("aria-busy");
    }
  };

  const update = (info) => {
    const waits = needsSignIn(info);
    const oauth = info.oauth || null;
    const signedIn = oauth?.state === "signed_in";
    signInBtn.setAttribute("aria-label", t("tools.oauth.sign_in_name", { name: info.name }));
    signOutBtn.setAttribute("aria-label", t("tools.oauth.sign_out_name", { name: info.name }));
    need.hidden = !waits;
    detail.textContent = waits && info.last_error ? serverText(info.last_error) : "";
    detail.hidden = !detail.textContent;
    if (!waits) progress.replaceChildren();
    signed.hidden = !signedIn;
    let line = "";
    if (signedIn) {
      line = t("tools.oauth.signed_in_as", { user: oauth.user || "—", issuer: oauth.issuer || "—" });
      if (oauth.expires_at) line += ` · ${t("tools.oauth.expires", { time: fmtDate(oauth.expires_at) })}`;
    }
    // Unchanged text is not written again (the line is a live region).
    if (who.textContent !== line) who.textContent = line;
    sealed.hidden = oauth?.state !== "sealed";
    el.hidden = need.hidden && signed.hidden && sealed.hidden && !error.textContent;
    if (focusSignIn && waits) {
      focusSignIn = false;
      const active = document.activeElement;
      if (!active || active === document.body) signInBtn.focus();
    }
  };

  return { el, update };
}

/** One discovered tool: name, description, schema, switch (PATCH /api/v1/hub/tools/{full}/toggle). */
function toolItem(tool, ctx) {
  const headId = uid("tool");
  return h(
    "li",
    { class: "tl-tool", "data-testid": `tool-${tool.full_name}` },
    h(
      "div",
      { class: "tl-tool-head" },
      h(
        "div",
        {},
        h("h4", { id: headId, class: "tl-tool-name" }, h("code", {}, tool.tool || tool.name)),
        tool.title ? h("span", { class: "muted" }, ` ${tool.title}`) : null,
        tool.requires_task ? h("span", { class: "badge badge-warn" }, t("tools.tool.requires_task")) : null,
      ),
      switchInput({
        checked: tool.enabled,
        name: t("tools.tool.enabled_name", { name: tool.full_name }),
        text: t("common.enabled"),
        disabled: ctx.readOnly,
        testid: "tool-enabled",
        onToggle: async (on) => {
          await api("PATCH", `/api/v1/hub/tools/${encodeURIComponent(tool.full_name)}/toggle`, {
            body: { enabled: on },
            signal: ctx.signal,
          });
          announce(t(on ? "tools.tool.now_on" : "tools.tool.now_off", { name: tool.full_name }));
        },
      }).el,
    ),
    tool.description ? toolDescription(tool.description, "tl-desc") : h("p", { class: "muted tl-desc" }, t("tools.tool.no_description")),
    h("p", { class: "tl-wire muted" }, t("tools.tool.wire", { name: tool.name })),
    schemaView(tool.inputSchema, { label: t("tools.schema.input_of", { name: tool.tool || tool.name }) }),
  );
}

/** Key/value rows (env variables, headers). Values are secrets: shown as passwords. */
function kvEditor({ legend, keyLabel, valueLabel, addLabel, removeLabel, hint, keyPlaceholder }) {
  const rows = h("div", { class: "kv-rows" });
  const reveal = h("input", { type: "checkbox", id: uid("kv-reveal") });
  const fs = h(
    "fieldset",
    { class: "kv" },
    h("legend", {}, legend),
    hint ? h("p", { class: "hint" }, hint) : null,
    rows,
    h(
      "div",
      { class: "row" },
      h("button", { class: "btn btn-small", type: "button", onclick: () => addRow() }, icon("plus"), addLabel),
      h("label", { class: "switch kv-reveal", for: reveal.id }, reveal, t("tools.kv.show_values")),
    ),
  );
  const renumber = () => {
    [...rows.children].forEach((row, i) => {
      const [k, v, rm] = row.querySelectorAll("input, button");
      k.setAttribute("aria-label", t(keyLabel, { n: i + 1 }));
      v.setAttribute("aria-label", t(valueLabel, { n: i + 1 }));
      rm.setAttribute("aria-label", t(removeLabel, { n: i + 1 }));
    });
  };
  const addRow = (k = "", v = "", focus = true) => {
    const key = h("input", { type: "text", value: k, autocomplete: "off", spellcheck: "false", placeholder: keyPlaceholder, class: "kv-key" });
    const val = h("input", { type: reveal.checked ? "text" : "password", value: v, autocomplete: "off", spellcheck: "false", class: "kv-value" });
    const row = h(
      "div",
      { class: "kv-row" },
      key,
      val,
      h(
        "button",
        {
          class: "btn btn-icon btn-small",
          type: "button",
          onclick: () => {
            row.remove();
            renumber();
          },
        },
        icon("close"),
      ),
    );
    rows.append(row);
    renumber();
    if (focus) key.focus();
  };
  reveal.addEventListener("change", () => {
    rows.querySelectorAll(".kv-value").forEach((i) => (i.type = reveal.checked ? "text" : "password"));
  });
  return {
    el: fs,
    /** {key: value} of the filled rows; throws on a value without a key or a repeated key. */
    value() {
      const out = {};
      for (const row of rows.children) {
        const k = row.querySelector(".kv-key").value.trim();
        const v = row.querySelector(".kv-value").value;
        if (!k && !v) continue;
        if (!k) throw new Error(t("tools.kv.missing_key", { legend }));
        if (k in out) throw new Error(t("tools.kv.duplicate", { key: k }));
        out[k] = v;
      }
      return out;
    },
  };
}

function registerDialog(ctx, state) {
  const formId = uid("reg");
  const d = openDialog({ title: t("tools.register.title"), wide: true });
  closeOnLeave(d, ctx.signal);
  const name = h("input", { type: "text", name: "name", autocomplete: "off", maxlength: "100", placeholder: t("tools.ph.server_name") });
  const transportName = uid("transport");
  const radios = Object.keys(TRANSPORTS).map((value) => {
    const id = uid("tr");
    return h(
      "div",
      { class: "seg-item" },
      h("input", { type: "radio", name: transportName, id, value, checked: value === "stdio" }),
      h("label", { for: id }, t(TRANSPORTS[value])),
    );
  });
  const transportSet = h(
    "fieldset",
    { class: "seg" },
    h("legend", {}, t("tools.register.transport")),
    h("div", { class: "seg-items" }, radios),
  );
  const command = h("input", { type: "text", name: "command", autocomplete: "off", spellcheck: "false", placeholder: t("tools.ph.command") });
  const args = h("textarea", { name: "args", rows: "3", spellcheck: "false", class: "tl-mono" });
  const cwd = h("input", { type: "text", name: "cwd", autocomplete: "off", spellcheck: "false" });
  const env = kvEditor({
    legend: t("tools.register.env"),
    keyLabel: "tools.kv.env_key",
    valueLabel: "tools.kv.env_value",
    removeLabel: "tools.kv.env_remove",
    addLabel: t("tools.kv.env_add"),
    hint: t("tools.register.env_hint"),
    keyPlaceholder: t("tools.ph.env_key"),
  });
  const url = h("input", { type: "url", name: "url", autocomplete: "off", spellcheck: "false", placeholder: t("tools.ph.server_url") });
  const headers = kvEditor({
    legend: t("tools.register.headers"),
    keyLabel: "tools.kv.header_key",
    valueLabel: "tools.kv.header_value",
    removeLabel: "tools.kv.header_remove",
    addLabel: t("tools.kv.header_add"),
    hint: t("tools.register.headers_hint"),
    keyPlaceholder: t("tools.ph.header_key"),
  });
  const category = h("input", { type: "text", name: "category", autocomplete: "off", placeholder: t("tools.ph.category") });
  const pkg = h("input", { type: "text", name: "package", autocomplete: "off", spellcheck: "false" });
  const description = h("textarea", { name: "description", rows: "2" });
  const tags = h("input", { type: "text", name: "tags", autocomplete: "off" });
  const connectTimeout = h("input", { type: "number", name: "connect_timeout", min: "1", max: "600", step: "1", placeholder: "30" });
  const callTimeout = h("input", { type: "number", name: "call_timeout", min: "1", max: "3600", step: "1", placeholder: "60" });
  const error = h("p", { class: "form-error", role: "alert" });
  const progress = h("p", { class: "tl-progress", role: "status", "aria-live": "polite" });

  const stdioFields = h(
    "div",
    { class: "tl-transport-fields" },
    field(t("tools.register.command"), command, { hint: t("tools.register.command_hint"), required: true }),
    field(t("tools.register.args"), args, { hint: t("tools.register.args_hint") }),
    env.el,
    field(t("tools.register.cwd"), cwd),
  );
  const httpFields = h(
    "div",
    { class: "tl-transport-fields", hidden: true },
    field(t("tools.register.url"), url, { hint: t("tools.register.url_hint"), required: true }),
    headers.el,
  );
  const transport = () => d.body.querySelector(`input[name="${transportName}"]:checked`).value;
  const syncTransport = () => {
    const stdio = transport() === "stdio";
    stdioFields.hidden = !stdio;
    httpFields.hidden = stdio;
    command.required = stdio;
    url.required = !stdio;
  };
  transportSet.addEventListener("change", syncTransport);

  const submit = h("button", { class: "btn btn-primary", type: "submit", form: formId }, t("tools.register.submit"));
  const form = h(
    "form",
    { id: formId, class: "tl-form", novalidate: true },
    field(t("tools.register.name"), name, { hint: t("tools.register.name_hint"), required: true }),
    transportSet,
    ctx.session && ctx.session.machine_owner === false
      ? h("p", { class: "hint" }, t("tools.register.stdio_owner_only"))
      : null,
    stdioFields,
    httpFields,
    h(
      "details",
      { class: "tl-advanced" },
      h("summary", {}, t("tools.register.advanced")),
      h(
        "div",
        { class: "tl-grid2" },
        field(t("tools.register.category"), category),
        field(t("tools.register.package"), pkg, { hint: t("tools.register.package_hint") }),
        field(t("tools.register.tags"), tags, { hint: t("tools.register.tags_hint") }),
        field(t("tools.register.connect_timeout"), connectTimeout),
        field(t("tools.register.call_timeout"), callTimeout),
      ),
      field(t("tools.register.description"), description),
    ),
    progress,
    error,
  );
  d.body.append(form);
  d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), submit);
  syncTransport();
  name.focus();

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const kind = transport();
    const body = { name: name.value.trim(), transport_type: kind };
    try {
      if (!body.name) throw Object.assign(new Error(t("tools.register.need_name")), { focus: name });
      if (kind === "stdio") {
        body.config = command.value.trim();
        if (!body.config) throw Object.assign(new Error(t("tools.register.need_command")), { focus: command });
        const a = args.value.split("\n").map((s) => s.trim()).filter(Boolean);
        if (a.length) body.args = a;
        const ev = env.value();
        if (Object.keys(ev).length) body.env = ev;
        if (cwd.value.trim()) body.cwd = cwd.value.trim();
      } else {
        body.config = url.value.trim();
        if (!/^https?:\/\/\S+$/i.test(body.config)) throw Object.assign(new Error(t("tools.register.need_url")), { focus: url });
        const hd = headers.value();
        if (Object.keys(hd).length) body.headers = hd;
      }
      if (category.value.trim()) body.category = category.value.trim();
      if (pkg.value.trim()) body.package = pkg.value.trim();
      if (description.value.trim()) body.description = description.value.trim();
      const tg = tags.value.split(",").map((s) => s.trim()).filter(Boolean);
      if (tg.length) body.tags = tg;
      if (connectTimeout.value) body.connect_timeout_secs = Number(connectTimeout.value);
      if (callTimeout.value) body.call_timeout_secs = Number(callTimeout.value);
    } catch (err) {
      error.textContent = err.message;
      if (err.focus) err.focus.focus();
      return;
    }
    submit.disabled = true;
    form.setAttribute("aria-busy", "true");
    progress.textContent = t("tools.register.connecting", { name: body.name });
    try {
      // Registration answers at once, usually `connecting`: the list shows the server
      // connecting (it polls), and the outcome of its first discovery comes as a toast.
      const info = await api("POST", "/api/v1/mcp/servers", { body, signal: ctx.signal });
      d.close();
      await state.reload();
      if (info.status === "connecting") {
        const msg = t("tools.register.done_connecting", { name: info.name });
        toast(msg, "info");
        announce(msg);
        watchFirstDiscovery(info, ctx);
      } else {
        registrationOutcome(info);
      }
    } catch (err) {
      if (isAbort(err)) return;
      error.textContent = err.message;
      progress.textContent = "";
      submit.disabled = false;
    } finally {
      form.removeAttribute("aria-busy");
    }
  });
}

/** Says how a new server's first discovery ended. */
function registrationOutcome(info) {
  const msg =
    info.status === "ready"
      ? t("tools.register.done_ready", { name: info.name, tools: plural("tools.count", info.tool_count) })
      : t("tools.register.done_status", { name: info.name, status: statusText(info.status) });
  toast(msg, info.status === "ready" ? "success" : info.status === "auth_required" ? "info" : "error");
  announce(msg);
}

/** Polls a server registered as `connecting` until its first discovery ends (or its
 *  connect timeout has long passed), then reports the outcome. */
async function watchFirstDiscovery(info, ctx) {
  const deadline = Date.now() + ((info.connect_timeout_secs || 30) + 15) * 1000;
  while (!ctx.signal.aborted && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    if (ctx.signal.aborted) return;
    let now;
    try {
      now = await api("GET", `/api/v1/mcp/servers/${encodeURIComponent(info.id)}`, { signal: ctx.signal });
    } catch (err) {
      if (isAbort(err) || (err && err.status === 404)) return; // left the page, or deleted
      continue;
    }
    if (now.status !== "connecting") {
      registrationOutcome(now);
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Built-in tools

async function builtinTab(panel, ctx) {
  const body = h("div", {}, h("p", { class: "loading" }, t("common.loading")));
  replace(
    panel,
    h("div", { class: "tl-section-head" }, h("h2", {}, t("tools.builtin.title"))),
    h("p", { class: "muted tl-intro" }, t("tools.builtin.intro")),
    body,
  );
  const load = async () => {
    try {
      const tools = await api("GET", "/api/v1/tools/builtin", { signal: ctx.signal });
      if (!tools.length) {
        replace(body, emptyState(t("tools.builtin.empty")));
      } else {
        replace(
          body,
          dataTable({
            attrs: { class: "tl-table" },
            caption: t("tools.builtin.title"),
            columns: [t("common.name"), t("common.description"), t("common.status")],
            rows: tools.map((tool) =>
              h(
                "tr",
                { "data-testid": `builtin-${tool.full_name}` },
                h(
                  "td",
                  { class: "tl-nowrap" },
                  h("code", {}, tool.full_name),
                  h("div", { class: "muted tl-small" }, t("tools.builtin.package", { name: tool.package })),
                ),
                h("td", {}, tool.description ? toolDescription(tool.description) : "", schemaView(tool.inputSchema)),
                h(
                  "td",
                  {},
                  switchInput({
                    checked: tool.enabled,
                    name: t("tools.tool.enabled_name", { name: tool.full_name }),
                    text: t("common.enabled"),
                    disabled: ctx.readOnly,
                    testid: "builtin-enabled",
                    onToggle: async (on) => {
                      await api("PATCH", `/api/v1/tools/builtin/${encodeURIComponent(tool.full_name)}/toggle`, {
                        body: { enabled: on },
                        signal: ctx.signal,
                      });
                      announce(t(on ? "tools.tool.now_on" : "tools.tool.now_off", { name: tool.full_name }));
                    },
                  }).el,
                ),
              ),
          ),
          }),
        );
      }
      ctx.markReady(panel, "builtin");
    } catch (e) {
      if (!isAbort(e)) replace(body, errorBlock(e, load));
    }
  };
  await load();
}

// ---------------------------------------------------------------------------------------
// Custom HTTP tools

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const PARAM_TYPES = ["string", "number", "integer", "boolean", "array", "enum"];

async function customTab(panel, ctx) {
  const body = h("div", {}, h("p", { class: "loading" }, t("common.loading")));
  const add = h(
    "button",
    { class: "btn btn-primary", type: "button", disabled: ctx.readOnly, onclick: () => customDialog(ctx, null, load) },
    icon("plus"),
    t("tools.custom.add"),
  );
  replace(
    panel,
    h("div", { class: "tl-section-head" }, h("h2", {}, t("tools.custom.title")), add),
    h("p", { class: "muted tl-intro" }, t("tools.custom.intro")),
    body,
  );
  async function load() {
    try {
      const all = await api("GET", "/api/v1/tools", { signal: ctx.signal });
      // The listing's `name` is the wire name (what MCP clients call); this tab edits the
      // tool's own name, `tool`.
      const tools = all
        .filter((x) => typeof x.source === "string" && x.source.startsWith("custom:"))
        .map((x) => ({ ...x, wire_name: x.name, name: x.tool || x.name }));
      if (!tools.length) {
        replace(body, emptyState(t("tools.custom.empty")));
      } else {
        replace(
          body,
          dataTable({
            attrs: { class: "tl-table" },
            caption: t("tools.custom.title"),
            columns: [t("common.name"), t("tools.custom.request"), t("common.status"), t("common.actions")],
            rows: tools.map((tool) => customRow(tool, ctx, load)),
          }),
        );
      }
      ctx.markReady(panel, "custom");
    } catch (e) {
      if (!isAbort(e)) replace(body, errorBlock(e, load));
    }
  }
  await load();
}

function customRow(tool, ctx, reload) {
  return h(
    "tr",
    { "data-testid": `custom-${tool.name}` },
    h(
      "td",
      {},
      h("code", {}, tool.full_name || `custom.${tool.name}`),
      tool.wire_name ? h("div", { class: "tl-small muted" }, t("tools.tool.wire", { name: tool.wire_name })) : null,
      tool.description ? h("div", { class: "tl-small" }, tool.description) : null,
    ),
    h(
      "td",
      { class: "tl-request" },
      h("span", { class: "badge" }, tool.http_method),
      " ",
      h("code", { class: "tl-config" }, tool.http_url),
      tool.http_headers && tool.http_headers.length
        ? h(
            "div",
            { class: "muted tl-small" },
            t("tools.custom.headers_list", { names: tool.http_headers.join(", ") }),
          )
        : null,
    ),
    h(
      "td",
      {},
      switchInput({
        checked: tool.enabled,
        name: t("tools.tool.enabled_name", { name: tool.full_name || tool.name }),
        text: t("common.enabled"),
        disabled: ctx.readOnly,
        testid: "custom-enabled",
        onToggle: async (on) => {
          await api("PATCH", `/api/v1/tools/${encodeURIComponent(tool.id)}/toggle`, {
            body: { enabled: on },
            signal: ctx.signal,
          });
          tool.enabled = on;
          announce(t(on ? "tools.tool.now_on" : "tools.tool.now_off", { name: tool.full_name || tool.name }));
        },
      }).el,
    ),
    h(
      "td",
      {},
      h(
        "div",
        { class: "row tl-row-actions" },
        h(
          "button",
          {
            class: "btn btn-small",
            type: "button",
            "aria-label": t("tools.custom.test_name", { name: tool.name }),
            onclick: () => testDialog(tool, ctx),
          },
          t("tools.custom.test"),
        ),
        h(
          "button",
          {
            class: "btn btn-small",
            type: "button",
            disabled: ctx.readOnly,
            "aria-label": t("tools.custom.edit_name", { name: tool.name }),
            onclick: () => customDialog(ctx, tool, reload),
          },
          icon("edit"),
          t("common.edit"),
        ),
        h(
          "button",
          {
            class: "btn btn-small btn-danger",
            type: "button",
            disabled: ctx.readOnly,
            "aria-label": t("tools.custom.delete_name", { name: tool.name }),
            onclick: async () => {
              const yes = await confirmDialog(t("tools.custom.delete_confirm", { name: tool.name }), {
                danger: true,
                confirmLabel: t("common.delete"),
              });
              if (!yes) return;
              try {
                await api("DELETE", `/api/v1/tools/${encodeURIComponent(tool.id)}`, { signal: ctx.signal });
                const msg = t("tools.custom.deleted", { name: tool.name });
                toast(msg, "success");
                announce(msg);
                await reload();
              } catch (e) {
                if (!isAbort(e)) toast(e.message, "error");
              }
            },
          },
          icon("trash"),
          t("common.delete"),
        ),
      ),
    ),
  );
}

/** Rows of the parameter editor from a schema, or null when the editor cannot show it. */
function schemaToRows(schema) {
  if (!schema || typeof schema !== "object" || Array.isArray(schema)) return null;
  const allowedTop = new Set(["type", "properties", "required", "additionalProperties", "$schema"]);
  if (Object.keys(schema).some((k) => !allowedTop.has(k))) return null;
  if (schema.type !== undefined && schema.type !== "object") return null;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const rows = [];
  for (const [name, p] of Object.entries(schema.properties || {})) {
    if (!p || typeof p !== "object") return null;
    const keys = Object.keys(p).filter((k) => k !== "description");
    const row = { name, required: required.has(name), description: p.description || "", type: "string", options: "" };
    if (Array.isArray(p.enum)) {
      if (keys.some((k) => k !== "enum" && k !== "type") || (p.type && p.type !== "string")) return null;
      if (p.enum.some((v) => typeof v !== "string")) return null;
      row.type = "enum";
      row.options = p.enum.join(", ");
    } else if (p.type === "array") {
      if (keys.some((k) => k !== "type" && k !== "items")) return null;
      if (p.items && (Object.keys(p.items).length !== 1 || p.items.type !== "string")) return null;
      row.type = "array";
    } else if (["string", "number", "integer", "boolean"].includes(p.type)) {
      if (keys.some((k) => k !== "type")) return null;
      row.type = p.type;
    } else return null;
    rows.push(row);
  }
  return rows;
}

function rowsToSchema(rows) {
  const properties = {};
  const required = [];
  for (const r of rows) {
    const p = {};
    if (r.type === "enum") {
      p.type = "string";
      p.enum = r.options.split(",").map((s) => s.trim()).filter(Boolean);
    } else if (r.type === "array") {
      p.type = "array";
      p.items = { type: "string" };
    } else p.type = r.type;
    if (r.description) p.description = r.description;
    properties[r.name] = p;
    if (r.required) required.push(r.name);
  }
  const schema = { type: "object", properties };
  if (required.length) schema.required = required;
  return schema;
}

/** The parameters editor: rows (name, type, required, description) or raw JSON. */
function paramsEditor(initialSchema) {
  const rowsBox = h("div", { class: "pe-rows" });
  const raw = h("textarea", { class: "tl-mono pe-raw", rows: "10", spellcheck: "false", id: uid("pe-raw") });
  const note = h("p", { class: "hint", role: "status" });
  const rowsView = h("div", { class: "pe-view" });
  const rawView = h("div", { class: "pe-view", hidden: true }, h("label", { for: raw.id }, t("tools.params.raw_label")), raw);
  const btnRows = h("button", { class: "btn btn-small", type: "button", "aria-pressed": "true" }, t("tools.params.mode_editor"));
  const btnRaw = h("button", { class: "btn btn-small", type: "button", "aria-pressed": "false" }, t("tools.params.mode_json"));
  let mode = "rows";

  const addRow = (r = { name: "", type: "string", required: false, description: "", options: "" }, focus = false) => {
    const name = h("input", { type: "text", value: r.name, class: "pe-name", autocomplete: "off", spellcheck: "false" });
    const type = h(
      "select",
      { class: "pe-type" },
      PARAM_TYPES.map((ty) => h("option", { value: ty, selected: ty === r.type }, t(`tools.params.type.${ty}`))),
    );
    const req = h("input", { type: "checkbox", class: "pe-required", checked: r.required });
    const desc = h("input", { type: "text", value: r.description, class: "pe-desc", autocomplete: "off" });
    const opts = h("input", { type: "text", value: r.options, class: "pe-options", autocomplete: "off", placeholder: t("tools.ph.options") });
    const optsWrap = h("div", { class: "pe-cell pe-options-cell", hidden: r.type !== "enum" }, h("label", {}, t("tools.params.options")), opts);
    type.addEventListener("change", () => (optsWrap.hidden = type.value !== "enum"));
    const row = h(
      "div",
      { class: "pe-row" },
      h("div", { class: "pe-cell" }, h("label", {}, t("tools.params.name")), name),
      h("div", { class: "pe-cell" }, h("label", {}, t("tools.params.type")), type),
      h("div", { class: "pe-cell pe-req-cell" }, h("label", { class: "switch" }, req, t("tools.params.required"))),
      h("div", { class: "pe-cell pe-desc-cell" }, h("label", {}, t("tools.params.description")), desc),
      optsWrap,
      h("button", { class: "btn btn-icon btn-small pe-remove", type: "button", onclick: () => { row.remove(); relabel(); } }, icon("close")),
    );
    rowsBox.append(row);
    relabel();
    if (focus) name.focus();
  };
  /** Labels point at their inputs; each carries the row number for screen readers. */
  const relabel = () => {
    [...rowsBox.children].forEach((row, i) => {
      const n = i + 1;
      const pairs = [
        [".pe-name", "tools.params.name_n"],
        [".pe-type", "tools.params.type_n"],
        [".pe-desc", "tools.params.description_n"],
        [".pe-options", "tools.params.options_n"],
      ];
      for (const [sel, key] of pairs) {
        const input = row.querySelector(sel);
        if (!input.id) input.id = uid("pe");
        input.closest(".pe-cell").querySelector("label").setAttribute("for", input.id);
        input.setAttribute("aria-label", t(key, { n }));
      }
      row.querySelector(".pe-required").setAttribute("aria-label", t("tools.params.required_n", { n }));
      row.querySelector(".pe-remove").setAttribute("aria-label", t("tools.params.remove_n", { n }));
    });
    empty.hidden = rowsBox.childElementCount > 0;
  };
  const readRows = () => {
    const rows = [];
    const seen = new Set();
    for (const row of rowsBox.children) {
      const r = {
        name: row.querySelector(".pe-name").value.trim(),
        type: row.querySelector(".pe-type").value,
        required: row.querySelector(".pe-required").checked,
        description: row.querySelector(".pe-desc").value.trim(),
        options: row.querySelector(".pe-options").value,
      };
      if (!r.name && !r.description) continue;
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(r.name)) throw new Error(t("tools.params.bad_name", { name: r.name }));
      if (seen.has(r.name)) throw new Error(t("tools.params.duplicate", { name: r.name }));
      if (r.type === "enum" && !r.options.split(",").some((s) => s.trim())) throw new Error(t("tools.params.need_options", { name: r.name }));
      seen.add(r.name);
      rows.push(r);
    }
    return rows;
  };
  const setRows = (rows) => {
    rowsBox.replaceChildren();
    rows.forEach((r) => addRow(r));
    relabel();
  };
  const empty = h("p", { class: "muted pe-empty" }, t("tools.params.none"));
  const setMode = (m) => {
    if (m === mode) return;
    if (m === "json") {
      let schema;
      try {
        schema = rowsToSchema(readRows());
      } catch (e) {
        note.textContent = e.message;
        return;
      }
      raw.value = JSON.stringify(schema, null, 2);
      note.textContent = "";
    } else {
      let parsed;
      try {
        parsed = JSON.parse(raw.value || "{}");
      } catch (e) {
        note.textContent = t("tools.params.bad_json", { error: e.message });
        return;
      }
      const rows = schemaToRows(parsed);
      if (!rows) {
        note.textContent = t("tools.params.not_representable");
        return;
      }
      setRows(rows);
      note.textContent = "";
    }
    mode = m;
    rowsView.hidden = m !== "rows";
    rawView.hidden = m !== "json";
    btnRows.setAttribute("aria-pressed", String(m === "rows"));
    btnRaw.setAttribute("aria-pressed", String(m === "json"));
  };
  btnRows.addEventListener("click", () => setMode("rows"));
  btnRaw.addEventListener("click", () => setMode("json"));

  rowsView.append(
    rowsBox,
    empty,
    h("button", { class: "btn btn-small", type: "button", onclick: () => addRow(undefined, true) }, icon("plus"), t("tools.params.add")),
  );
  const fs = h(
    "fieldset",
    { class: "pe" },
    h("legend", {}, t("tools.params.legend")),
    h("div", { class: "row pe-modes", role: "group", "aria-label": t("tools.params.mode") }, btnRows, btnRaw),
    note,
    rowsView,
    rawView,
  );
  const rows = schemaToRows(initialSchema || { type: "object", properties: {} });
  if (rows) setRows(rows);
  else {
    raw.value = JSON.stringify(initialSchema, null, 2);
    mode = "json";
    rowsView.hidden = true;
    rawView.hidden = false;
    btnRows.setAttribute("aria-pressed", "false");
    btnRaw.setAttribute("aria-pressed", "true");
    note.textContent = t("tools.params.not_representable");
  }
  relabel();
  return {
    el: fs,
    /** The JSON Schema; throws with a message naming the problem. */
    value() {
      if (mode === "rows") return rowsToSchema(readRows());
      let v;
      try {
        v = JSON.parse(raw.value || "{}");
      } catch (e) {
        throw new Error(t("tools.params.bad_json", { error: e.message }));
      }
      if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error(t("tools.params.not_object"));
      return v;
    },
  };
}

function customDialog(ctx, tool, reload) {
  const editing = !!tool;
  const formId = uid("ct");
  const d = openDialog({
    title: editing ? t("tools.custom.edit_title", { name: tool.name }) : t("tools.custom.create_title"),
    wide: true,
  });
  closeOnLeave(d, ctx.signal);
  const name = h("input", { type: "text", value: tool?.name || "", autocomplete: "off", spellcheck: "false", maxlength: "64", placeholder: t("tools.ph.tool_name") });
  const description = h("textarea", { rows: "2" });
  description.value = tool?.description || "";
  const method = h(
    "select",
    {},
    METHODS.map((m) => h("option", { value: m, selected: (tool?.http_method || "GET").toUpperCase() === m }, m)),
  );
  const url = h("input", { type: "text", value: tool?.http_url || "", autocomplete: "off", spellcheck: "false", placeholder: t("tools.ph.tool_url") });
  const bodyTpl = h("textarea", { class: "tl-mono", rows: "4", spellcheck: "false", placeholder: t("tools.ph.body") });
  bodyTpl.value = tool?.http_body_template || "";
  const bodyField = field(t("tools.custom.body"), bodyTpl, { hint: t("tools.custom.body_hint") });
  const timeout = h("input", { type: "number", min: "1", max: "300", step: "1", placeholder: "30", value: tool?.timeout_secs ?? "" });
  const enabled = h("input", { type: "checkbox", checked: editing ? tool.enabled : true, id: uid("ct-enabled") });
  const headers = kvEditor({
    legend: t("tools.custom.headers"),
    keyLabel: "tools.kv.header_key",
    valueLabel: "tools.kv.header_value",
    removeLabel: "tools.kv.header_remove",
    addLabel: t("tools.kv.header_add"),
    hint: editing ? t("tools.custom.headers_replace_hint") : t("tools.custom.headers_hint"),
    keyPlaceholder: t("tools.ph.header_key"),
  });
  // Header values are never shown: editing keeps them unless the user replaces them all.
  const replaceHeaders = h("input", { type: "checkbox", id: uid("ct-rh") });
  const existing = tool?.http_headers || [];
  const headersBox = editing
    ? h(
        "div",
        { class: "tl-headers-edit" },
        h(
          "p",
          { class: "hint" },
          existing.length
            ? t("tools.custom.headers_current", { names: existing.join(", ") })
            : t("tools.custom.headers_none"),
        ),
        h("label", { class: "switch", for: replaceHeaders.id }, replaceHeaders, t("tools.custom.headers_replace")),
        h("div", { class: "tl-headers-rows", hidden: true }, headers.el),
      )
    : headers.el;
  if (editing) {
    replaceHeaders.addEventListener("change", () => {
      headersBox.querySelector(".tl-headers-rows").hidden = !replaceHeaders.checked;
    });
  }
  const params = paramsEditor(tool?.parameters);
  const syncMethod = () => {
    bodyField.hidden = method.value === "GET";
  };
  method.addEventListener("change", syncMethod);
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { id: formId, class: "tl-form", novalidate: true },
    h(
      "div",
      { class: "tl-grid2" },
      field(t("tools.custom.name"), name, { hint: t("tools.custom.name_hint"), required: true }),
      field(t("tools.custom.method"), method),
    ),
    field(t("tools.custom.url"), url, { hint: t("tools.custom.url_hint"), required: true }),
    field(t("tools.custom.description"), description, { hint: t("tools.custom.description_hint") }),
    params.el,
    headersBox,
    bodyField,
    h(
      "div",
      { class: "tl-grid2" },
      field(t("tools.custom.timeout"), timeout),
      editing ? null : h("div", { class: "field tl-enabled-field" }, h("label", { class: "switch", for: enabled.id }, enabled, t("tools.custom.enabled_on_create"))),
    ),
    error,
  );
  syncMethod();
  const submit = h("button", { class: "btn btn-primary", type: "submit", form: formId }, editing ? t("common.save") : t("common.create"));
  d.body.append(form);
  d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), submit);
  name.focus();

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const body = {};
    try {
      body.name = name.value.trim();
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(body.name)) throw Object.assign(new Error(t("tools.custom.bad_name")), { focus: name });
      body.description = description.value.trim();
      body.http_method = method.value;
      body.http_url = url.value.trim();
      if (!/^https?:\/\//i.test(body.http_url)) throw Object.assign(new Error(t("tools.custom.bad_url")), { focus: url });
      body.parameters = params.value();
      const tpl = bodyTpl.value.trim();
      if (method.value !== "GET" && tpl) body.http_body_template = tpl;
      else if (editing) body.http_body_template = null;
      if (timeout.value) body.timeout_secs = Number(timeout.value);
      else if (editing) body.timeout_secs = null;
      if (!editing || replaceHeaders.checked) body.http_headers = headers.value();
      if (!editing) body.enabled = enabled.checked;
    } catch (err) {
      error.textContent = err.message;
      if (err.focus) err.focus.focus();
      return;
    }
    submit.disabled = true;
    try {
      if (editing) await api("PATCH", `/api/v1/tools/${encodeURIComponent(tool.id)}`, { body, signal: ctx.signal });
      else await api("POST", "/api/v1/tools", { body, signal: ctx.signal });
      d.close();
      const msg = editing ? t("tools.custom.saved", { name: body.name }) : t("tools.custom.created", { name: body.name });
      toast(msg, "success");
      announce(msg);
      await reload();
    } catch (err) {
      if (isAbort(err)) return;
      error.textContent = err.message;
      submit.disabled = false;
    }
  });
}

/** The type a schema property is edited as. */
function propKind(p) {
  if (!p || typeof p !== "object") return "json";
  if (Array.isArray(p.enum) && p.enum.length) return "enum";
  let type = p.type;
  if (Array.isArray(type)) type = type.find((x) => x !== "null");
  if (type === "array") {
    const it = p.items;
    const itType = it && (Array.isArray(it.type) ? it.type.find((x) => x !== "null") : it.type);
    return !it || itType === "string" ? "strings" : "json";
  }
  if (["string", "number", "integer", "boolean"].includes(type)) return type;
  return "json";
}

/**
 * A form generated from a JSON Schema's properties: text, number, checkbox, select (enum),
 * one-per-line (array of strings), JSON (anything else). `value()` → the arguments object.
 */
export function schemaForm(schema) {
  const props = (schema && typeof schema === "object" && schema.properties) || {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const getters = [];
  const fields = Object.entries(props).map(([key, p]) => {
    const kind = propKind(p);
    const req = required.has(key);
    const desc = p && typeof p.description === "string" ? p.description : "";
    const def = p && "default" in p ? p.default : undefined;
    let control;
    let get;
    switch (kind) {
      case "boolean": {
        control = h("input", { type: "checkbox", checked: def === true, "data-arg": key });
        const id = uid("arg");
        control.id = id;
        getters.push(() => [key, control.checked, true]);
        return h(
          "div",
          { class: "field" },
          h("label", { class: "switch", for: id }, control, key, req ? h("span", { class: "tl-req", "aria-hidden": "true" }, " *") : null),
          desc ? h("span", { class: "hint" }, desc) : null,
        );
      }
      case "enum":
        control = h(
          "select",
          { "data-arg": key },
          req ? null : h("option", { value: "" }, t("tools.test.unset")),
          p.enum.map((v, i) => h("option", { value: String(i), selected: def !== undefined && JSON.stringify(v) === JSON.stringify(def) }, typeof v === "string" ? v : JSON.stringify(v))),
        );
        get = () => (control.value === "" ? undefined : p.enum[Number(control.value)]);
        break;
      case "number":
      case "integer":
        control = h("input", { type: "number", step: kind === "integer" ? "1" : "any", "data-arg": key, value: def ?? "" });
        get = () => {
          if (control.value.trim() === "") return undefined;
          const n = Number(control.value);
          if (Number.isNaN(n) || (kind === "integer" && !Number.isInteger(n))) throw new Error(t("tools.test.bad_number", { name: key }));
          return n;
        };
        break;
      case "strings":
        control = h("textarea", { rows: "3", "data-arg": key });
        if (Array.isArray(def)) control.value = def.join("\n");
        get = () => {
          const lines = control.value.split("\n").map((s) => s.trim()).filter(Boolean);
          return lines.length || req ? lines : undefined;
        };
        break;
      case "string":
        control = h("input", { type: "text", "data-arg": key, value: def ?? "", autocomplete: "off" });
        get = () => (control.value === "" ? undefined : control.value);
        break;
      default:
        control = h("textarea", { class: "tl-mono", rows: "3", "data-arg": key, spellcheck: "false", placeholder: t("tools.ph.json") });
        if (def !== undefined) control.value = JSON.stringify(def, null, 2);
        get = () => {
          if (!control.value.trim()) return undefined;
          try {
            return JSON.parse(control.value);
          } catch (e) {
            throw new Error(t("tools.test.bad_json", { name: key, error: e.message }));
          }
        };
    }
    getters.push(() => [key, get(), false]);
    const hint = [t(`tools.test.kind.${kind}`), desc].filter(Boolean).join(" — ");
    return field(key, control, { hint, required: req });
  });
  return {
    el: h(
      "div",
      { class: "schema-form" },
      fields.length ? fields : h("p", { class: "muted" }, t("tools.test.no_params")),
    ),
    value() {
      const out = {};
      for (const g of getters) {
        const [k, v] = g();
        if (v === undefined) {
          if (required.has(k)) throw new Error(t("tools.test.required", { name: k }));
          continue;
        }
        out[k] = v;
      }
      return out;
    },
  };
}

function testDialog(tool, ctx) {
  const formId = uid("test");
  const d = openDialog({ title: t("tools.test.title", { name: tool.name }), wide: true });
  closeOnLeave(d, ctx.signal);
  const sf = schemaForm(tool.parameters);
  const error = h("p", { class: "form-error", role: "alert" });
  const result = h("div", { class: "tl-test-result", "aria-live": "polite", "data-testid": "test-result" });
  const submit = h("button", { class: "btn btn-primary", type: "submit", form: formId }, t("tools.test.run"));
  const form = h(
    "form",
    { id: formId, class: "tl-form", novalidate: true },
    h("p", { class: "muted" }, h("span", { class: "badge" }, tool.http_method), " ", h("code", {}, tool.http_url)),
    sf.el,
    error,
  );
  d.body.append(form, result);
  d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.close")), submit);
  const first = form.querySelector("input, select, textarea");
  (first || submit).focus();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    let args;
    try {
      args = sf.value();
    } catch (err) {
      error.textContent = err.message;
      return;
    }
    submit.disabled = true;
    replace(result, h("p", { class: "loading" }, t("tools.test.running")));
    try {
      const r = await api("POST", `/api/v1/tools/${encodeURIComponent(tool.id)}/test`, {
        body: { arguments: args },
        signal: ctx.signal,
      });
      let pretty = r.body;
      if (/json/i.test(r.content_type || "") || /^\s*[[{]/.test(r.body || "")) {
        try {
          pretty = JSON.stringify(JSON.parse(r.body), null, 2);
        } catch {
          pretty = r.body;
        }
      }
      const ok = r.status >= 200 && r.status < 300;
      replace(
        result,
        h("h3", {}, t("tools.test.response")),
        h(
          "p",
          { class: "row" },
          h("span", { class: `badge ${ok ? "tl-badge-ok" : "badge-danger"}`, "data-testid": "test-status" }, t("tools.test.status", { status: r.status })),
          r.content_type ? h("code", { class: "tl-small" }, r.content_type) : null,
          h("span", { class: "muted tl-small" }, t("tools.test.elapsed", { ms: fmtNumber(r.elapsed_ms) })),
          r.truncated ? h("span", { class: "badge badge-warn" }, t("tools.test.truncated")) : null,
        ),
        h("pre", { class: "tl-test-body", "data-testid": "test-body", tabindex: "0", "aria-label": t("tools.test.body") }, pretty || t("tools.test.empty_body")),
      );
      result.scrollIntoView({ block: "nearest" });
      announce(t("tools.test.done", { status: r.status }));
    } catch (err) {
      if (isAbort(err)) return;
      replace(result, errorBlock(err));
      announce(err.message, { assertive: true });
    } finally {
      submit.disabled = false;
    }
  });
}
