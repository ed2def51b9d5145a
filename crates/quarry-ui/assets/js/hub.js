// `#/hub`: the catalog browser and bundle builder (seed 002's Skill Creator). Categories →
// packages → tools (`/api/catalog`, `/api/catalog/{category}`, `/api/catalog/{package}/tools`),
// search across categories (`/api/catalog/search`), and a bundle of whole packages and single
// tools that becomes an endpoint URL (`/api/mcp?servers=…&tools=…`) with ready-to-paste
// client configurations. The bundle lives in localStorage; nothing is stored on the server.

import { t, h, icon, replace, announce, toast, api, apiHeaders, copyButton, tabs, fmtNumber, pageHeader, emptyState, errorBlock } from "./app.js";
import { uid, plural, schemaView, toolDescription } from "./tools.js";

/** The hub's default cap on one endpoint's tools (quarry-hub DEFAULT_MAX_TOOLS; `--max-tools`). */
const DEFAULT_CAP = 32;
const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
const DEFAULT_NAME = "quarry-tools";
const TOKEN_PLACEHOLDER = "<token>";

function isAbort(e) {
  return e && (e.name === "AbortError" || e.code === "aborted");
}

/** Percent-encodes one list item of `?servers=` / `?tools=` (also !'()* for shells). */
function enc(s) {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

// ---------------------------------------------------------------------------------------
// The bundle (localStorage)

function storageKey(session) {
  return `quarry.hub.bundle.${session?.user?.id || "local"}`;
}

function loadBundle(session) {
  const empty = { servers: {}, tools: {}, name: DEFAULT_NAME, search: false };
  try {
    const raw = JSON.parse(localStorage.getItem(storageKey(session)) || "null");
    if (!raw || typeof raw !== "object") return empty;
    return {
      servers: raw.servers && typeof raw.servers === "object" ? raw.servers : {},
      tools: raw.tools && typeof raw.tools === "object" ? raw.tools : {},
      name: typeof raw.name === "string" ? raw.name : DEFAULT_NAME,
      search: !!raw.search,
    };
  } catch {
    return empty;
  }
}

/** Tools the bundle exposes (a tool of a package taken whole counts once). */
function bundleCount(b) {
  let n = 0;
  for (const s of Object.values(b.servers)) n += Number(s.toolCount) || 0;
  for (const tl of Object.values(b.tools)) if (!(tl.serverId in b.servers)) n += 1;
  return n;
}

function bundleUrl(b) {
  const servers = Object.keys(b.servers);
  const tools = Object.keys(b.tools).filter((name) => !(b.tools[name].serverId in b.servers));
  if (!servers.length && !tools.length) return "";
  const params = [];
  if (servers.length) params.push(`servers=${servers.map(enc).join(",")}`);
  if (tools.length) params.push(`tools=${tools.map(enc).join(",")}`);
  if (b.search) params.push("mode=search");
  return `${location.origin}/api/mcp?${params.join("&")}`;
}

/** Ready-to-paste configurations for `url` under `name`; `auth` adds a Bearer placeholder. */
export function clientConfigs(name, url, auth) {
  const header = `Bearer ${TOKEN_PLACEHOLDER}`;
  const quote = (s) => `'${s.replace(/'/g, "'\\''")}'`;
  const claudeCmd =
    `claude mcp add --transport http ${name} ${quote(url)}` + (auth ? ` --header ${quote(`Authorization: ${header}`)}` : "");
  const withHeaders = (o) => (auth ? { ...o, headers: { Authorization: header } } : o);
  const claudeJson = { mcpServers: { [name]: withHeaders({ type: "http", url }) } };
  const cursorJson = { mcpServers: { [name]: withHeaders({ url }) } };
  // Claude Desktop's config starts stdio servers only: mcp-remote bridges to HTTP.
  let local = false;
  try {
    const u = new URL(url);
    local = u.protocol === "https:" || ["localhost", "127.0.0.1", "[::1]"].includes(u.hostname);
  } catch {
    local = true;
  }
  const args = ["-y", "mcp-remote", url];
  if (auth) args.push("--header", "Authorization:${QUARRY_AUTH_HEADER}");
  if (!local) args.push("--allow-http");
  const desktop = { command: "npx", args };
  if (auth) desktop.env = { QUARRY_AUTH_HEADER: header };
  const desktopJson = { mcpServers: { [name]: desktop } };
  return {
    claudeCmd,
    claudeJson: JSON.stringify(claudeJson, null, 2),
    cursorJson: JSON.stringify(cursorJson, null, 2),
    desktopJson: JSON.stringify(desktopJson, null, 2),
  };
}

// ---------------------------------------------------------------------------------------
// Page

export async function render({ root, query, signal, session }) {
  const bundle = loadBundle(session);
  const cap = Number(session?.max_tools) || DEFAULT_CAP;
  const capKnown = Number(session?.max_tools) > 0;
  const auth = session?.mode === "token";
  const save = () => {
    try {
      localStorage.setItem(storageKey(session), JSON.stringify(bundle));
    } catch {
      /* storage full or disabled: the bundle lives until reload */
    }
  };

  // ---- Layout
  const levelHeading = h("h2", { class: "hub-level-title", tabindex: "-1", id: uid("hub-level") });
  const crumbs = h("ol", { class: "hub-crumbs" });
  const level = h("div", { class: "hub-level", "data-testid": "hub-level" });
  const searchInput = h("input", {
    type: "search",
    id: uid("hub-q"),
    name: "q",
    autocomplete: "off",
    placeholder: t("hub.search.placeholder"),
  });
  const searchForm = h(
    "form",
    { class: "hub-search", role: "search", "aria-label": t("hub.search.label") },
    h("label", { for: searchInput.id, class: "sr-only" }, t("hub.search.label")),
    searchInput,
    h("button", { class: "btn", type: "submit" }, icon("search"), t("common.search")),
  );
  const browse = h(
    "section",
    { class: "hub-browse", "aria-labelledby": levelHeading.id },
    searchForm,
    h("nav", { class: "hub-nav", "aria-label": t("hub.crumbs_label") }, crumbs),
    levelHeading,
    level,
  );

  const bundlePanel = h("aside", { class: "hub-bundle card", "aria-labelledby": "hub-bundle-title", "data-testid": "bundle" });
  root.append(
    pageHeader(t("hub.title")),
    h("p", { class: "muted hub-intro" }, t("hub.intro")),
    h("div", { class: "hub-layout" }, browse, bundlePanel),
  );

  // ---- Navigation state: {cat, pkg, q}, kept in the address (pushState: no re-render).
  const nav = { cat: query.get("cat") || "", pkg: query.get("pkg") || "", q: query.get("q") || "" };
  searchInput.value = nav.q;
  const go = (next, { focus = true } = {}) => {
    Object.assign(nav, { cat: "", pkg: "", q: "" }, next);
    const q = new URLSearchParams();
    for (const k of ["cat", "pkg", "q"]) if (nav[k]) q.set(k, nav[k]);
    const hash = `#/hub${q.toString() ? `?${q}` : ""}`;
    if (location.hash !== hash) history.pushState(null, "", hash);
    if (!nav.q) searchInput.value = "";
    return show(focus);
  };
  searchForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = searchInput.value.trim();
    if (q) go({ q });
    else go({});
  });

  /** Package facts learnt while browsing (name, usable tool count), for the bundle. */
  const known = new Map();

  const crumb = (label, target) =>
    h(
      "li",
      {},
      target
        ? h("button", { class: "btn-link", type: "button", onclick: () => go(target) }, label)
        : h("span", { "aria-current": "page" }, label),
    );

  let generation = 0;
  async function show(focus) {
    const mine = ++generation;
    const stale = () => mine !== generation || signal.aborted;
    const parts = [crumb(t("hub.crumbs.all"), nav.q || nav.cat || nav.pkg ? {} : null)];
    if (nav.q) parts.push(crumb(t("hub.crumbs.search", { q: nav.q }), null));
    else {
      if (nav.cat) parts.push(crumb(nav.cat, nav.pkg ? { cat: nav.cat } : null));
      if (nav.pkg) parts.push(crumb(nav.pkg, null));
    }
    replace(crumbs, parts);
    replace(level, h("p", { class: "loading" }, t("common.loading")));
    try {
      if (nav.q) await showSearch(stale);
      else if (nav.pkg) await showPackage(stale);
      else if (nav.cat) await showCategory(stale);
      else await showCategories(stale);
    } catch (e) {
      if (stale() || isAbort(e)) return;
      levelHeading.textContent = t("hub.error_title");
      replace(level, errorBlock(e, () => show(true)));
    }
    if (stale()) return;
    syncChecks();
    if (focus) levelHeading.focus();
  }

  async function showCategories(stale) {
    const { categories } = await api("GET", "/api/catalog", { signal });
    if (stale()) return;
    levelHeading.textContent = t("hub.categories.title");
    if (!categories.length) {
      replace(level, emptyState(t("hub.categories.empty")));
      return;
    }
    replace(
      level,
      h(
        "ul",
        { class: "hub-cards", "aria-label": t("hub.categories.title") },
        categories.map((c) =>
          h(
            "li",
            {},
            h(
              "button",
              {
                class: "hub-card",
                type: "button",
                "data-testid": `category-${c.id}`,
                onclick: () => go({ cat: c.id }),
              },
              h("span", { class: "hub-card-title" }, c.name),
              h(
                "span",
                { class: "hub-card-meta" },
                `${plural("hub.packages", c.packageCount)} · ${plural("tools.count", c.toolCount)}`,
              ),
            ),
          ),
        ),
      ),
    );
    announce(plural("hub.categories.announce", categories.length));
  }

  async function showCategory(stale) {
    const { packages } = await api("GET", `/api/catalog/${encodeURIComponent(nav.cat)}`, { signal });
    if (stale()) return;
    levelHeading.textContent = t("hub.category.title", { name: nav.cat });
    for (const p of packages) known.set(p.id, { name: p.name, toolCount: p.toolCount });
    replace(
      level,
      h(
        "ul",
        { class: "hub-list" },
        packages.map((p) => {
          const headId = uid("pkg");
          return h(
            "li",
            { class: "hub-item hub-package", "data-testid": `package-${p.id}` },
            h(
              "div",
              { class: "hub-item-head" },
              packageCheck(p.id, p.name, p.toolCount),
              h(
                "div",
                { class: "hub-item-main" },
                h("h3", { id: headId }, p.name, " ", h("code", { class: "hub-id" }, p.id)),
                h(
                  "div",
                  { class: "row hub-badges" },
                  h("span", { class: "badge" }, t(`hub.kind.${p.kind}`)),
                  h("span", { class: "badge badge-info" }, plural("tools.count", p.toolCount)),
                  (p.tags || []).map((tag) => h("span", { class: "hub-tag" }, tag)),
                ),
                p.description ? h("p", { class: "hub-desc" }, p.description) : null,
              ),
              h(
                "button",
                {
                  class: "btn btn-small",
                  type: "button",
                  "aria-describedby": headId,
                  onclick: () => go({ cat: nav.cat, pkg: p.id }),
                },
                t("hub.package.browse"),
              ),
            ),
          );
        }),
      ),
    );
    announce(plural("hub.category.announce", packages.length, { name: nav.cat }));
  }

  async function showPackage(stale) {
    const { tools } = await api("GET", `/api/catalog/${encodeURIComponent(nav.pkg)}/tools`, { signal });
    if (stale()) return;
    const name = tools[0]?.serverName || known.get(nav.pkg)?.name || nav.pkg;
    known.set(nav.pkg, { name, toolCount: tools.length });
    if (!nav.cat && tools[0]?.category) {
      // Reached from search: put the category into the trail.
      nav.cat = tools[0].category;
      replace(crumbs, crumb(t("hub.crumbs.all"), {}), crumb(nav.cat, { cat: nav.cat }), crumb(nav.pkg, null));
    }
    levelHeading.textContent = t("hub.package.title", { name });
    replace(
      level,
      h(
        "div",
        { class: "hub-package-whole" },
        packageCheck(nav.pkg, name, tools.length, true),
      ),
      tools.length
        ? h("ul", { class: "hub-list" }, tools.map((tool) => toolItem(tool, false)))
        : emptyState(t("hub.package.empty")),
    );
    announce(plural("hub.package.announce", tools.length, { name }));
  }

  async function showSearch(stale) {
    const r = await api("GET", "/api/catalog/search", { query: { q: nav.q, limit: 100 }, signal });
    if (stale()) return;
    levelHeading.textContent = t("hub.search.title", { q: nav.q });
    const summary = r.total > r.tools.length
      ? t("hub.search.more", { shown: fmtNumber(r.tools.length), total: fmtNumber(r.total) })
      : plural("hub.search.count", r.total);
    replace(
      level,
      h("p", { class: "muted", "data-testid": "search-count" }, summary),
      r.tools.length
        ? h("ul", { class: "hub-list" }, r.tools.map((tool) => toolItem(tool, true)))
        : emptyState(t("hub.search.none", { q: nav.q })),
    );
    announce(summary);
  }

  // ---- Checkboxes

  function packageCheck(id, name, toolCount, wide = false) {
    const input = h("input", {
      type: "checkbox",
      id: uid("pkgc"),
      "data-bundle-server": id,
      "aria-label": t("hub.bundle.add_package", { name }),
    });
    input.addEventListener("change", () => {
      if (input.checked) bundle.servers[id] = { name, toolCount };
      else delete bundle.servers[id];
      changed(input.checked ? t("hub.bundle.added", { name }) : t("hub.bundle.removed", { name }));
    });
    return h(
      "label",
      { class: `hub-check${wide ? " hub-check-wide" : ""}`, for: input.id },
      input,
      h("span", { class: wide ? "" : "sr-only" }, wide ? plural("hub.bundle.whole_package", toolCount, { name }) : t("hub.bundle.whole")),
    );
  }

  function toolItem(tool, withPackage) {
    const headId = uid("tool");
    const input = h("input", {
      type: "checkbox",
      id: uid("toolc"),
      "data-bundle-tool": tool.name,
      "data-server": tool.serverId,
      "aria-label": t("hub.bundle.add_tool", { name: tool.name }),
    });
    input.addEventListener("change", () => {
      if (input.checked) bundle.tools[tool.name] = { serverId: tool.serverId, serverName: tool.serverName, wireName: tool.wireName };
      else delete bundle.tools[tool.name];
      changed(input.checked ? t("hub.bundle.added", { name: tool.name }) : t("hub.bundle.removed", { name: tool.name }));
    });
    return h(
      "li",
      { class: "hub-item hub-tool", "data-testid": `catalog-tool-${tool.name}` },
      h(
        "div",
        { class: "hub-item-head" },
        h("label", { class: "hub-check", for: input.id }, input, h("span", { class: "sr-only" }, t("hub.bundle.in_bundle"))),
        h(
          "div",
          { class: "hub-item-main" },
          h("h3", { id: headId }, h("code", {}, tool.name)),
          withPackage
            ? h(
                "div",
                { class: "row hub-badges" },
                h(
                  "button",
                  { class: "btn-link hub-pkg-link", type: "button", onclick: () => go({ cat: tool.category, pkg: tool.serverId }) },
                  t("hub.search.in_package", { name: tool.serverName || tool.serverId }),
                ),
                h(
                  "button",
                  { class: "btn-link", type: "button", onclick: () => go({ cat: tool.category }) },
                  t("hub.search.in_category", { name: tool.category }),
                ),
              )
            : null,
          tool.description ? toolDescription(tool.description, "hub-desc") : h("p", { class: "muted hub-desc" }, t("tools.tool.no_description")),
          h("p", { class: "muted hub-small" }, t("tools.tool.wire", { name: tool.wireName })),
          tool.namedEndpoints && tool.namedEndpoints.length
            ? h(
                "p",
                { class: "muted hub-small", "data-testid": "tool-endpoints" },
                t("hub.endpoint.exposed_by", { names: tool.namedEndpoints.join(", ") }),
              )
            : null,
          schemaView(tool.inputSchema, { label: t("tools.schema.input_of", { name: tool.name }) }),
        ),
      ),
    );
  }

  /** Every checkbox on the page reflects the bundle (tools of a whole package are included). */
  function syncChecks() {
    root.querySelectorAll("input[data-bundle-server]").forEach((i) => {
      i.checked = i.dataset.bundleServer in bundle.servers;
    });
    root.querySelectorAll("input[data-bundle-tool]").forEach((i) => {
      const whole = i.dataset.server in bundle.servers;
      i.checked = whole || i.dataset.bundleTool in bundle.tools;
      i.disabled = whole;
      i.title = whole ? t("hub.bundle.included_with_package") : "";
    });
  }

  function changed(message) {
    save();
    syncChecks();
    renderBundle();
    if (message) announce(message);
  }

  // ---- Bundle panel

  const countEl = h("p", { class: "hub-count", "data-testid": "bundle-count" });
  const meter = h("meter", { min: "0", max: String(cap), value: "0", "aria-label": t("hub.bundle.meter") });
  const warning = h("div", { class: "hub-warning", role: "alert", "data-testid": "bundle-warning" });
  const itemsEl = h("ul", { class: "hub-bundle-items", "aria-label": t("hub.bundle.items") });
  const nameInput = h("input", { type: "text", id: uid("hub-name"), value: bundle.name, autocomplete: "off", spellcheck: "false", maxlength: "64" });
  const nameError = h("p", { class: "form-error", id: uid("hub-name-err") });
  nameInput.setAttribute("aria-describedby", nameError.id);
  nameInput.addEventListener("input", () => {
    const v = nameInput.value.trim();
    if (NAME_RE.test(v)) {
      bundle.name = v;
      nameError.textContent = "";
      nameInput.removeAttribute("aria-invalid");
      save();
      renderOutputs();
    } else {
      nameError.textContent = t("hub.bundle.bad_name");
      nameInput.setAttribute("aria-invalid", "true");
    }
  });
  const searchMode = h("input", { type: "checkbox", id: uid("hub-sm"), checked: bundle.search });
  searchMode.addEventListener("change", () => {
    bundle.search = searchMode.checked;
    changed(null);
  });
  const urlInput = h("input", { type: "text", id: uid("hub-url"), readonly: true, class: "tl-mono hub-url", "data-testid": "bundle-url", spellcheck: "false" });
  urlInput.addEventListener("focus", () => urlInput.select());
  const checkResult = h("div", { class: "hub-check-result", "aria-live": "polite", "data-testid": "bundle-check" });
  const checkBtn = h("button", { class: "btn btn-small", type: "button", onclick: () => checkEndpoint() }, t("hub.bundle.check"));
  const pres = {
    claudeCmd: h("pre", { class: "hub-code", "data-testid": "config-claude-cmd" }),
    claudeJson: h("pre", { class: "hub-code", "data-testid": "config-claude-json" }),
    cursorJson: h("pre", { class: "hub-code", "data-testid": "config-cursor-json" }),
    desktopJson: h("pre", { class: "hub-code", "data-testid": "config-desktop-json" }),
  };
  const labelled = (btn, label) => {
    btn.setAttribute("aria-label", label);
    return btn;
  };
  const block = (title, key, hint) =>
    h(
      "div",
      { class: "hub-config" },
      h("div", { class: "hub-config-head" }, h("h4", {}, title), labelled(copyButton(() => pres[key].textContent), t("hub.config.copy_label", { what: title }))),
      hint ? h("p", { class: "hint" }, hint) : null,
      pres[key],
    );
  const clients = tabs(
    [
      {
        id: "claude-code",
        label: t("hub.config.claude_code"),
        render: (p) =>
          p.append(
            block(t("hub.config.claude_cmd"), "claudeCmd"),
            block(t("hub.config.claude_json"), "claudeJson", t("hub.config.claude_json_hint")),
          ),
      },
      { id: "cursor", label: t("hub.config.cursor"), render: (p) => p.append(block(t("hub.config.cursor_json"), "cursorJson", t("hub.config.cursor_hint"))) },
      {
        id: "desktop",
        label: t("hub.config.desktop"),
        render: (p) => p.append(block(t("hub.config.desktop_json"), "desktopJson", t("hub.config.desktop_hint"))),
      },
    ],
    { label: t("hub.config.clients") },
  );
  const outputs = h(
    "div",
    { class: "hub-outputs" },
    h(
      "div",
      { class: "field" },
      h("label", { for: urlInput.id }, t("hub.bundle.url")),
      h("div", { class: "hub-url-row" }, urlInput, copyButton(() => urlInput.value, t("hub.bundle.copy_url"))),
      h("div", { class: "row" }, checkBtn),
      checkResult,
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: nameInput.id }, t("hub.bundle.name")),
      nameInput,
      h("span", { class: "hint" }, t("hub.bundle.name_hint")),
      nameError,
    ),
    saveBlock(),
    auth ? h("p", { class: "hub-auth-note", role: "note" }, t("hub.config.auth_note", { placeholder: TOKEN_PLACEHOLDER })) : null,
    h("h3", { class: "hub-sub" }, t("hub.config.title")),
    clients.el,
  );
  const emptyEl = h("p", { class: "muted hub-bundle-empty" }, t("hub.bundle.empty"));
  const clearBtn = h(
    "button",
    {
      class: "btn btn-small btn-danger",
      type: "button",
      onclick: () => {
        bundle.servers = {};
        bundle.tools = {};
        bundle.search = false;
        searchMode.checked = false;
        changed(t("hub.bundle.cleared"));
      },
    },
    icon("trash"),
    t("hub.bundle.clear"),
  );
  replace(
    bundlePanel,
    h("div", { class: "hub-bundle-head" }, h("h2", { id: "hub-bundle-title" }, t("hub.bundle.title")), clearBtn),
    countEl,
    meter,
    warning,
    emptyEl,
    itemsEl,
    h(
      "div",
      { class: "field hub-search-mode", id: "hub-search-mode" },
      h("label", { class: "switch", for: searchMode.id }, searchMode, t("hub.bundle.search_mode")),
      h("span", { class: "hint" }, t("hub.bundle.search_mode_hint")),
    ),
    outputs,
  );

  /** Names of unavailable bundle entries (switched off or removed since they were added). */
  const unavailable = new Set();

  function renderBundle() {
    const n = bundleCount(bundle);
    const servers = Object.entries(bundle.servers);
    const tools = Object.entries(bundle.tools).filter(([, tl]) => !(tl.serverId in bundle.servers));
    const isEmpty = !servers.length && !tools.length;
    const listed = bundle.search && !isEmpty ? 2 : n;
    countEl.textContent = bundle.search && !isEmpty
      ? t("hub.bundle.count_search", { n: fmtNumber(n), cap: fmtNumber(cap) })
      : t("hub.bundle.count", { n: fmtNumber(n), cap: fmtNumber(cap) });
    countEl.title = capKnown ? "" : t("hub.bundle.cap_default", { cap: fmtNumber(cap) });
    meter.value = Math.min(listed, cap);
    meter.setAttribute("aria-valuetext", countEl.textContent);
    meter.high = Math.max(cap - 1, 1);
    meter.optimum = 1;
    if (listed > cap) {
      warning.hidden = false;
      replace(warning, h("strong", {}, t("hub.bundle.over_title")), " ", t("hub.bundle.over", { n: fmtNumber(listed), cap: fmtNumber(cap) }));
    } else {
      warning.hidden = true;
      warning.replaceChildren();
    }
    emptyEl.hidden = !isEmpty;
    bundlePanel.querySelector("#hub-search-mode").hidden = isEmpty;
    outputs.hidden = isEmpty;
    clearBtn.disabled = isEmpty;
    replace(
      itemsEl,
      servers.map(([id, s]) =>
        bundleItem(
          id,
          t("hub.bundle.item_package", { name: s.name || id, id }),
          plural("tools.count", Number(s.toolCount) || 0),
          () => {
            delete bundle.servers[id];
            changed(t("hub.bundle.removed", { name: s.name || id }));
          },
        ),
      ),
      tools.map(([name]) =>
        bundleItem(name, name, t("hub.bundle.item_tool"), () => {
          delete bundle.tools[name];
          changed(t("hub.bundle.removed", { name }));
        }),
      ),
    );
    checkResult.replaceChildren();
    renderOutputs();
  }

  function bundleItem(key, label, meta, onRemove) {
    const missing = unavailable.has(key);
    return h(
      "li",
      { class: `hub-bundle-item${missing ? " hub-missing" : ""}`, "data-testid": `bundle-item-${key}` },
      h(
        "div",
        { class: "hub-bundle-item-main" },
        h("code", {}, label),
        h("span", { class: "muted hub-small" }, meta),
        missing ? h("span", { class: "badge badge-warn" }, t("hub.bundle.unavailable")) : null,
      ),
      h(
        "button",
        { class: "btn btn-icon btn-small", type: "button", "aria-label": t("hub.bundle.remove", { name: key }), onclick: onRemove },
        icon("close"),
      ),
    );
  }

  /**
   * "Save as a named endpoint": the bundle stored on the server (`POST /api/v1/endpoints`,
   * or `PUT` when the name is already the caller's), served at `/mcp/e/<name>`; clients of
   * that URL see later edits without changing their configuration.
   */
  function saveBlock() {
    const id = uid("hub-ep");
    const input = h("input", {
      type: "text",
      id,
      autocomplete: "off",
      spellcheck: "false",
      maxlength: "64",
      value: (bundle.name || DEFAULT_NAME).toLowerCase().replace(/[^a-z0-9_-]/g, "-"),
      "data-testid": "endpoint-name",
    });
    const status = h("div", { class: "hub-check-result", "aria-live": "polite", "data-testid": "endpoint-status" });
    const btn = h("button", { class: "btn btn-small", type: "button", "data-testid": "endpoint-save" }, t("hub.endpoint.save"));
    btn.addEventListener("click", async () => {
      const name = input.value.trim();
      if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(name)) {
        replace(status, h("p", { class: "form-error" }, t("hub.endpoint.bad_name")));
        return;
      }
      const servers = Object.keys(bundle.servers);
      const tools = Object.keys(bundle.tools).filter((n) => !(bundle.tools[n].serverId in bundle.servers));
      if (!servers.length && !tools.length) {
        replace(status, h("p", { class: "form-error" }, t("hub.endpoint.empty")));
        return;
      }
      const body = { name, mode: bundle.search ? "search" : "list" };
      if (servers.length) body.servers = servers;
      if (tools.length) body.tools = tools;
      btn.disabled = true;
      try {
        let saved;
        try {
          saved = await api("POST", "/api/v1/endpoints", { body });
        } catch (e) {
          if (e.status !== 409) throw e;
          saved = await api("PUT", `/api/v1/endpoints/${encodeURIComponent(name)}`, { body });
        }
        replace(
          status,
          h("p", {}, t("hub.endpoint.saved", { name: saved.name })),
          h("div", { class: "hub-url-row" }, h("code", { class: "tl-mono", "data-testid": "endpoint-url" }, saved.url), copyButton(() => saved.url, t("hub.bundle.copy_url"))),
        );
        announce(t("hub.endpoint.saved", { name: saved.name }));
      } catch (e) {
        replace(status, h("p", { class: "form-error" }, e.message));
      } finally {
        btn.disabled = false;
      }
    });
    return h(
      "div",
      { class: "field" },
      h("label", { for: id }, t("hub.endpoint.name")),
      h("div", { class: "hub-url-row" }, input, btn),
      h("span", { class: "hint" }, t("hub.endpoint.hint")),
      status,
    );
  }

  function renderOutputs() {
    const url = bundleUrl(bundle);
    urlInput.value = url;
    if (!url) return;
    const c = clientConfigs(bundle.name || DEFAULT_NAME, url, auth);
    pres.claudeCmd.textContent = c.claudeCmd;
    pres.claudeJson.textContent = c.claudeJson;
    pres.cursorJson.textContent = c.cursorJson;
    pres.desktopJson.textContent = c.desktopJson;
  }

  /**
   * Asks the endpoint itself what it lists (a stateless 2026-07-28 `tools/list` with this
   * page's credentials): the exact tools, or the server's refusal (its cap, unknown names).
   */
  async function checkEndpoint() {
    const url = bundleUrl(bundle);
    if (!url) return;
    checkBtn.disabled = true;
    replace(checkResult, h("p", { class: "loading" }, t("hub.bundle.checking")));
    try {
      const r = await fetch(url, {
        method: "POST",
        credentials: "same-origin",
        signal,
        headers: apiHeaders({
          "Content-Type": "application/json",
          Accept: "application/json, text/event-stream",
          "MCP-Protocol-Version": "2026-07-28",
          "Mcp-Method": "tools/list",
        }),
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/list",
          params: {
            _meta: {
              "io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientInfo": { name: "quarry-ui", version: "1" },
              "io.modelcontextprotocol/clientCapabilities": {},
            },
          },
        }),
      });
      const text = await r.text();
      let msg = null;
      if ((r.headers.get("content-type") || "").includes("text/event-stream")) {
        for (const ev of text.replace(/\r\n/g, "\n").split("\n\n")) {
          const data = ev.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
          if (data) {
            try {
              const m = JSON.parse(data);
              if (m && m.id === 1) msg = m;
            } catch {
              /* not JSON */
            }
          }
        }
      } else {
        try {
          msg = JSON.parse(text);
        } catch {
          msg = null;
        }
      }
      if (msg && msg.result && Array.isArray(msg.result.tools)) {
        const names = msg.result.tools.map((x) => x.name);
        replace(
          checkResult,
          h("p", { class: "hub-ok" }, plural("hub.bundle.check_ok", names.length)),
          h("ul", { class: "hub-check-list" }, names.map((n) => h("li", {}, h("code", {}, n)))),
        );
        announce(plural("hub.bundle.check_ok", names.length));
      } else {
        const err = msg?.error;
        const message = err?.message || (text && text.length < 500 ? text : `HTTP ${r.status}`);
        replace(checkResult, h("p", { class: "form-error", role: "alert" }, t("hub.bundle.check_failed", { error: message })));
        if (err?.data?.cap && Number(err.data.cap) !== cap) {
          checkResult.append(h("p", { class: "hint" }, t("hub.bundle.cap_reported", { cap: fmtNumber(err.data.cap) })));
        }
      }
    } catch (e) {
      if (!isAbort(e)) replace(checkResult, h("p", { class: "form-error", role: "alert" }, t("hub.bundle.check_failed", { error: e.message })));
    } finally {
      checkBtn.disabled = false;
    }
  }

  /** Brings stored counts up to date and flags entries that are no longer offered. */
  async function refreshBundle() {
    const pkgs = new Set([...Object.keys(bundle.servers), ...Object.values(bundle.tools).map((x) => x.serverId)]);
    await Promise.all(
      [...pkgs].map(async (id) => {
        let tools = null;
        try {
          tools = (await api("GET", `/api/catalog/${encodeURIComponent(id)}/tools`, { signal })).tools;
        } catch (e) {
          if (isAbort(e)) return;
          if (e.status !== 404) return; // keep what we have on a transient failure
        }
        if (tools) known.set(id, { name: tools[0]?.serverName || id, toolCount: tools.length });
        if (bundle.servers[id]) {
          if (tools) bundle.servers[id].toolCount = tools.length;
          if (!tools || !tools.length) unavailable.add(id);
        }
        const names = new Set((tools || []).map((x) => x.name));
        for (const [name, tl] of Object.entries(bundle.tools)) {
          if (tl.serverId === id && !names.has(name)) unavailable.add(name);
        }
      }),
    );
    save();
  }

  renderBundle();
  await Promise.all([show(false), refreshBundle().then(() => !signal.aborted && renderBundle())]);
  if (!signal.aborted) root.dataset.ready = "true";
}
