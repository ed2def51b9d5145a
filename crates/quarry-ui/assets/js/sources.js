// Sources that sync a knowledge base (issue 43). Loaded by kb.js on first use:
// - `sourcesPanel()`: the Sources tab of `#/kb/<id>/sources` — each source with where it is,
//   its schedule, last sync, lag, failures and its latest report's counts; "Add source" (a
//   dialog with the fields of the chosen kind, the mask, the schedule, a write-only
//   credential and, optionally, who reads its documents; opened at once, for an unanswered
//   question, from the Insight page's "Add a source"); "Sync now" per source, with the
//   report that comes back.
// - `sourcePage()`: `#/kb/<id>/sources/<source id>` — the source's state, its settings (mask,
//   schedule; credential replaced or forgotten; its reader mapping — the same rule rows as
//   the dialog's, `readerRules()`), its recent reports with their per-file
//   lines, "Sync now" and "Detach" (keeping its documents or not) behind a confirmation.
// Everything goes through the REST routes of crates/quarry-server/src/api/sources.rs; errors
// are shown as the API words them (through serverText()).

import {
  ApiError,
  announce,
  api,
  app,
  confirmDialog,
  emptyState,
  errorBlock,
  fmtDate,
  fmtNumber,
  h,
  icon,
  navigate,
  openDialog,
  replace,
  serverText,
  t,
  toast,
} from "./app.js";

const KB_BASE = "/api/v1/knowledge-bases";
const SRC_BASE = "/api/v1/sources";
/** While a sync runs, its source is looked at again this often. */
const POLL_MS = 3000;
/** Every kind the API takes, in the order the picker shows them. */
const KINDS = ["git", "s3", "webdav", "site", "folder"];
/** Schedules offered (seconds; "" syncs only when asked). */
const INTERVALS = ["", "900", "3600", "21600", "86400", "604800"];
const COUNTS = ["added", "changed", "renamed", "deleted", "unchanged", "skipped"];
const ACTIONS = ["added", "changed", "renamed", "deleted", "skipped"];
const COUNT_BADGE = { added: "badge-ok", changed: "badge-info", renamed: "badge-info", deleted: "badge-warn", skipped: "badge-warn", unchanged: "" };
const REPORTS_FIRST = 20;
const REPORTS_MAX = 100;

const sourcesUrl = (kb) => `${KB_BASE}/${encodeURIComponent(kb)}/sources`;
const sourceUrl = (id) => `${SRC_BASE}/${encodeURIComponent(id)}`;
const sourceHref = (kbKey, id) => `#/kb/${encodeURIComponent(kbKey)}/sources/${encodeURIComponent(id)}`;
const uid = (p) => `${p}-${Math.random().toString(36).slice(2, 8)}`;

// ---------------------------------------------------------------------------------------
// Small helpers

/** What the session may do: `write` (sync) and `admin` (attach, change, detach). */
function rights(session) {
  const level = ["read", "write", "admin"].indexOf(session?.access ?? "admin");
  const ro = !!session?.read_only;
  return { write: !ro && level >= 1, admin: !ro && level >= 2 };
}

/** `t()` with `<key>_one` or `<key>_other`, chosen by `vars.n`. */
const tn = (key, vars) => t(`${key}_${Number(vars.n) === 1 ? "one" : "other"}`, vars);

/** Where a source is, in one line, as the CLI's `Location::describe` writes it. */
export function describe(loc) {
  if (!loc) return "—";
  switch (loc.kind) {
    case "folder":
      return loc.path;
    case "git":
      return `${loc.url}${loc.branch ? `#${loc.branch}` : ""}${loc.path ? `:${loc.path}` : ""}`;
    case "s3": {
      const at = [loc.endpoint, loc.region].filter(Boolean);
      return `s3://${loc.bucket}${loc.prefix ? `/${loc.prefix}` : ""}${at.length ? ` (${at.join(", ")})` : ""}`;
    }
    case "webdav":
      return loc.url;
    case "site":
      return loc.sitemap;
    default:
      return JSON.stringify(loc);
  }
}

const kindName = (kind) => (KINDS.includes(kind) ? t(`src.kind.${kind}`) : kind);

function kindBadge(kind) {
  return h("span", { class: "badge src-kind", dataset: { kind } }, kindName(kind));
}

/** A length of time, no finer than it needs to be: "40 s", "7 min", "2 h 5 min", "3 d". */
function fmtSpan(secs) {
  const s = Math.max(0, Math.round(secs));
  if (s < 90) return t("src.span.s", { n: s });
  if (s < 5400) return t("src.span.min", { n: Math.round(s / 60) });
  if (s < 172800) return t("src.span.h", { h: Math.floor(s / 3600), min: Math.floor((s % 3600) / 60) });
  return t("src.span.d", { n: Math.floor(s / 86400) });
}

/** "5 minutes ago", "in 2 hours", in the page's language. */
function fmtAgo(ms) {
  if (ms === null || ms === undefined) return "";
  const diff = (ms - Date.now()) / 1000;
  const abs = Math.abs(diff);
  const [v, unit] = abs < 60 ? [diff, "second"] : abs < 3600 ? [diff / 60, "minute"] : abs < 86400 ? [diff / 3600, "hour"] : [diff / 86400, "day"];
  try {
    return new Intl.RelativeTimeFormat(app.lang, { numeric: "auto" }).format(Math.round(v), unit);
  } catch {
    return "";
  }
}

/** A moment as a date and how long ago (or until) it is. */
function when(ms) {
  if (ms === null || ms === undefined) return "—";
  const ago = fmtAgo(ms);
  return ago ? t("src.when", { date: fmtDate(ms), ago }) : fmtDate(ms);
}

/** A schedule: "Only when asked", "Every hour", "Every 15 minutes"… */
function fmtInterval(secs) {
  if (secs === null || secs === undefined) return t("src.every.off");
  const n = Number(secs);
  if (n % 604800 === 0) return tn("src.every.weeks", { n: n / 604800 });
  if (n % 86400 === 0) return tn("src.every.days", { n: n / 86400 });
  if (n % 3600 === 0) return tn("src.every.hours", { n: n / 3600 });
  if (n % 60 === 0) return tn("src.every.minutes", { n: n / 60 });
  return tn("src.every.seconds", { n });
}

/** The state a source is in: `running`, `failing`, `never` (synced) or `ok`. */
function stateOf(s, latest) {
  if (latest?.status === "running") return "running";
  if (s.failures > 0 || latest?.status === "failed") return "failing";
  if (!s.last_sync_at && !latest) return "never";
  return "ok";
}

function stateBadge(state) {
  const cls = { running: "badge-info", failing: "badge-danger", ok: "badge-ok", never: "" }[state];
  return h("span", { class: `badge ${cls} src-state`, dataset: { state } }, state === "running" ? h("span", { class: "kb-spinner", "aria-hidden": "true" }) : null, t(`src.state.${state}`));
}

/** A report's counts as badges ("3 added", "1 skipped"); zeros are muted. */
function countBadges(report) {
  const c = report?.counts || {};
  return h(
    "ul",
    { class: "kb-counts src-counts", "aria-label": t("src.counts_label"), dataset: { testid: "report-counts" } },
    COUNTS.map((k) => h("li", { class: `badge ${c[k] ? COUNT_BADGE[k] : "src-zero"}`, dataset: { count: k } }, t(`src.count.${k}`, { n: fmtNumber(c[k] || 0) }))),
  );
}

function reportStatusBadge(status) {
  const cls = { succeeded: "badge-ok", failed: "badge-danger", running: "badge-info" }[status] || "";
  return h("span", { class: `badge ${cls}`, dataset: { status } }, ["succeeded", "failed", "running"].includes(status) ? t(`src.report.${status}`) : status);
}

/** A report in one sentence, for toasts and screen readers. */
function reportSentence(r) {
  const c = r.counts || {};
  return t("src.report.sentence", {
    added: c.added || 0,
    changed: c.changed || 0,
    renamed: c.renamed || 0,
    deleted: c.deleted || 0,
    unchanged: c.unchanged || 0,
    skipped: c.skipped || 0,
  });
}

/** Facts about a source as a description list: [label, value, testid?] rows. */
function facts(rows, cls = "") {
  return h(
    "dl",
    { class: `src-facts ${cls}` },
    rows.filter(Boolean).map(([label, value, testid]) => [h("dt", {}, label), h("dd", { dataset: testid ? { testid } : {} }, value)]),
  );
}

/** The rows every view of a source shows: schedule, files, documents, syncs, lag. */
function stateRows(s, latest) {
  const lag = (Date.now() - (s.last_success_at ?? s.created_at)) / 1000;
  const lastSync = s.last_sync_at
    ? [when(s.last_sync_at), latest && latest.status !== "running" ? " · " : "", latest && latest.status !== "running" ? reportStatusBadge(latest.status) : ""]
    : latest?.status === "running"
      ? t("src.first_sync_running")
      : t("src.never_synced");
  return [
    [t("src.f.schedule"), fmtInterval(s.interval_seconds), "schedule"],
    s.watch ? [t("src.f.watch"), t("src.watch.on"), "watch"] : null,
    [t("src.f.mask"), h("code", {}, s.mask || "**"), "mask"],
    [t("src.f.documents"), fmtNumber(s.documents), "documents"],
    [t("src.f.readers"), mappingSummary(s.readers), "readers-mapping"],
    [t("src.f.last_sync"), lastSync, "last-sync"],
    s.interval_seconds ? [t("src.f.next_sync"), s.next_sync_at ? when(s.next_sync_at) : "—", "next-sync"] : null,
    [t("src.f.lag"), h("span", { title: t("src.lag_help") }, s.last_success_at ? fmtSpan(lag) : t("src.lag_never", { span: fmtSpan(lag) })), "lag"],
  ];
}

/** A reader mapping in one line: "Everyone (no mapping)", "2 rules · CODEOWNERS". */
function mappingSummary(m) {
  if (!m) return t("src.readers.none");
  const parts = [];
  if (m.rules?.length) parts.push(tn("src.readers.n_rules", { n: m.rules.length }));
  if (m.codeowners) parts.push(t("src.readers.codeowners"));
  return parts.length ? parts.join(" · ") : t("src.readers.admins_only");
}

/** A reader mapping's rules as a list: globs → readers. */
function mappingList(m) {
  if (!m) return h("p", { class: "muted", dataset: { testid: "readers-none" } }, t("src.readers.none_long"));
  const keys = (r) => (r.readers.length ? r.readers.map((k) => (k === "everyone" ? t("src.readers.everyone") : k)).join(", ") : t("src.readers.admins_only"));
  return h(
    "div",
    { dataset: { testid: "readers-mapping-list" } },
    m.rules?.length
      ? h(
          "ol",
          { class: "src-rules" },
          m.rules.map((r) => h("li", { dataset: { testid: "readers-rule" } }, h("code", {}, r.paths), h("span", { "aria-hidden": "true" }, " → "), h("span", { class: "sr-only" }, " "), keys(r))),
        )
      : null,
    h("p", { class: "muted" }, m.codeowners ? t("src.readers.codeowners_on") : t("src.readers.codeowners_off")),
    h("p", { class: "hint" }, t("src.readers.rest_admins")),
  );
}

/** Failures in a row and the last error, when the source is failing. */
function failureBox(s) {
  if (!s.failures && !s.last_error) return null;
  return h(
    "div",
    { class: "src-failing", dataset: { testid: "source-failing" } },
    h("p", { class: "src-failing-head" }, icon("retry"), tn("src.failing", { n: s.failures || 1 }), s.interval_seconds && s.next_sync_at ? ` ${t("src.next_try", { when: fmtAgo(s.next_sync_at) })}` : ""),
    s.last_error ? h("p", { class: "src-failing-error", dataset: { testid: "last-error" } }, serverText(s.last_error)) : null,
  );
}

/** Runs `tick()` now and every POLL_MS while it resolves true; `now()` runs it at once; the
 * window's focus wakes it too. Stops when `signal` aborts. */
function repeater(signal, tick) {
  let timer = null;
  let busy = false;
  let again = false;
  const run = async () => {
    clearTimeout(timer);
    timer = null;
    if (signal.aborted) return;
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    let more = false;
    try {
      more = await tick();
    } catch (e) {
      if (signal.aborted || e.name === "AbortError") return;
      console.warn(e);
      more = true;
    } finally {
      busy = false;
    }
    if (again) {
      again = false;
      run();
    } else if (more && !signal.aborted) timer = setTimeout(run, document.hidden ? POLL_MS * 3 : POLL_MS);
  };
  const wake = () => !document.hidden && !timer && !busy && run();
  window.addEventListener("focus", wake);
  signal.addEventListener("abort", () => {
    clearTimeout(timer);
    window.removeEventListener("focus", wake);
  });
  return { now: run, later: () => !timer && !busy && (timer = setTimeout(run, POLL_MS)) };
}

/**
 * `POST /sources/{id}/sync`. Resolves `{ok: true, report}` or `{ok: false, message, running}`
 * (`running`: it goes on on the server — a sync already running, or one that outlived the
 * request). Never throws but for an abort.
 */
async function syncSource(id, signal) {
  try {
    const out = await api("POST", `${sourceUrl(id)}/sync`, { signal });
    return { ok: true, report: out.report, documents: out.documents || [] };
  } catch (e) {
    if (signal?.aborted || e.name === "AbortError") throw e;
    if (e.status === 408) return { ok: false, running: true, message: t("src.sync.continues") };
    return { ok: false, running: e.status === 409, message: e.message, status: e.status };
  }
}

/** A "Sync now" button with its result line: while the request runs the button says so (and
 * how long it has been); then the line shows the report's counts, or the API's refusal. */
function syncControl({ source, signal, onDone, label }) {
  const text = h("span", {}, label || t("src.sync_now"));
  const button = h("button", { class: "btn", type: "button", dataset: { testid: "sync-now" }, "aria-label": t("src.sync_named", { name: describe(source.location) }) }, icon("refresh"), text);
  const result = h("div", { class: "src-result", role: "status", dataset: { testid: "sync-result" } });
  let running = false;
  const run = async () => {
    if (running) return;
    running = true;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    const t0 = Date.now();
    const tick = () => replace(text, t("src.syncing_for", { span: fmtSpan((Date.now() - t0) / 1000) }));
    replace(text, t("src.syncing"));
    const clock = setInterval(tick, 1000);
    replace(result, h("p", { class: "muted" }, h("span", { class: "kb-spinner", "aria-hidden": "true" }), t("src.sync.started")));
    announce(t("src.sync.started"));
    let out;
    try {
      out = await syncSource(source.id, signal);
    } catch {
      return; // left the page
    } finally {
      clearInterval(clock);
      running = false;
      button.disabled = false;
      button.removeAttribute("aria-busy");
      replace(text, label || t("src.sync_now"));
    }
    if (out.ok) {
      const sentence = reportSentence(out.report);
      replace(
        result,
        h("p", { class: "src-result-ok", dataset: { status: out.report.status } }, reportStatusBadge(out.report.status), " ", sentence),
        out.documents.length ? h("p", { class: "muted" }, tn("src.sync.queued", { n: fmtNumber(out.documents.length) })) : null,
      );
      const msg = t("src.sync.done", { sentence });
      toast(msg, "success");
      announce(msg);
    } else if (out.running) {
      // Not a failure: it goes on on the server, and the page polls until its report is in.
      replace(result, h("p", { class: "src-result-info", dataset: { testid: "sync-info" } }, icon("refresh"), out.message));
      announce(out.message);
    } else {
      replace(result, h("div", { class: "error-block src-result-error", dataset: { testid: "sync-error" } }, h("p", {}, out.message)));
      announce(out.message, { assertive: true });
    }
    if (onDone) onDone(out);
  };
  button.addEventListener("click", run);
  return { button, result, run };
}

// ---------------------------------------------------------------------------------------
// Add a source

/** The label of the credential's two fields, per kind. */
const CREDENTIAL_LABELS = {
  git: ["src.cred.git_user", "src.cred.git_secret"],
  s3: ["src.cred.s3_user", "src.cred.s3_secret"],
  webdav: ["src.cred.dav_user", "src.cred.dav_secret"],
  site: ["src.cred.site_user", "src.cred.site_secret"],
};

/** A field: label, control, hint and an error line; `.el`, `.input`, `.error`. */
function formField(key, label, input, { hint, required } = {}) {
  const id = uid(`src-${key}`);
  input.id = id;
  const hintEl = hint ? h("span", { class: "hint", id: `${id}-hint` }, hint) : null;
  const error = h("p", { class: "kb-field-error", id: `${id}-error`, role: "alert" });
  input.setAttribute("aria-describedby", [hintEl ? hintEl.id : null, error.id].filter(Boolean).join(" "));
  if (required) input.setAttribute("aria-required", "true");
  const labelEl = h("label", { for: id }, label, required ? h("span", { class: "src-req", "aria-hidden": "true" }, " *") : null);
  return { key, input, error, label: labelEl, hint: hintEl, el: h("div", { class: "field", dataset: { field: key } }, labelEl, input, hintEl, error) };
}

let addFields = null;
/** The fields `POST …/sources` takes, from the API's own description (`/api/v1/openapi.json`,
 * read once); empty when it cannot be read. */
function addSourceFields() {
  addFields ??= api("GET", "/api/v1/openapi.json").then(
    (doc) => new Set(Object.keys(doc?.components?.schemas?.AddSource?.properties || {})),
    () => new Set(),
  );
  return addFields;
}

/** "Sync on change" for a folder: a checkbox with its hint; `.el`, `.input`. */
function watchBox(checked) {
  const input = h("input", { type: "checkbox", name: "watch", id: uid("src-watch"), checked });
  const hint = h("span", { class: "hint", id: `${input.id}-hint` }, t("src.watch.hint"));
  input.setAttribute("aria-describedby", hint.id);
  return { input, el: h("div", { class: "field src-watch" }, h("label", { class: "switch", for: input.id }, input, t("src.watch.label")), hint) };
}

const textInput = (name, attrs = {}) => h("input", { type: "text", name, autocomplete: "off", spellcheck: "false", ...attrs });

/** The schedule picker: presets, or a number of minutes. `.value()` → seconds, null (only when
 * asked) or throws when the minutes are not a whole number ≥ 1. */
function scheduleField(current) {
  const select = h("select", { name: "interval" });
  const presets = INTERVALS.map((v) => h("option", { value: v }, fmtInterval(v === "" ? null : Number(v))));
  const custom = h("option", { value: "custom" }, t("src.every.custom"));
  select.append(...presets, custom);
  const minutes = h("input", { type: "number", name: "interval_minutes", min: "1", step: "1", inputmode: "numeric" });
  const field = formField("interval", t("src.f.schedule"), select, { hint: t("src.schedule_hint") });
  const minutesField = formField("interval_minutes", t("src.every.minutes_label"), minutes);
  const cur = current === null || current === undefined ? "" : String(current);
  if (INTERVALS.includes(cur)) select.value = cur;
  else {
    select.value = "custom";
    minutes.value = String(Math.max(1, Math.round(Number(cur) / 60)));
  }
  const sync = () => (minutesField.el.hidden = select.value !== "custom");
  select.addEventListener("change", () => {
    sync();
    if (select.value === "custom") minutes.focus();
  });
  sync();
  return {
    fields: [field, minutesField],
    el: h("div", { class: "src-schedule" }, field.el, minutesField.el),
    value() {
      if (select.value === "") return null;
      if (select.value !== "custom") return Number(select.value);
      const n = Number(minutes.value);
      if (!minutes.value.trim() || !Number.isInteger(n) || n < 1) {
        const e = new Error(t("src.every.minutes_invalid"));
        e.field = "interval_minutes";
        throw e;
      }
      // An interval in seconds that is not a whole number of minutes stays as it was.
      if (current && Math.max(1, Math.round(current / 60)) === n) return current;
      return n * 60;
    },
  };
}

/**
 * The rules of a reader mapping (path globs → reader keys, tried in order) and its CODEOWNERS
 * switch, as the source's settings and the add dialog both show them (`m`: the mapping to
 * start from, or none). `.parts`: the help, the rule rows, "Add a rule", the switch and an
 * error line, to put in a fieldset; `.value()` → `{rules, codeowners}` (a row left empty is
 * left out); `.isEmpty()`: no rule and no CODEOWNERS; `.owns(message)`: whether an API
 * message is about the mapping; `.fail(message)` shows it on the rule it names (what is
 * typed stays); `.clear()`.
 */
function readerRules(m) {
  const rulesBox = h("ol", { class: "src-rule-rows", dataset: { testid: "readers-rules" } });
  const head = h("div", { class: "src-rule-head", "aria-hidden": "true" }, h("span", {}, t("src.readers.paths")), h("span", {}, t("src.readers.keys")));
  const error = h("p", { class: "form-error", role: "alert", id: uid("src-readers-error"), dataset: { testid: "readers-error" } });
  const rows = () => [...rulesBox.children].map((li) => {
    const [paths, keys] = li.querySelectorAll("input");
    return { li, paths, keys };
  });
  const splitKeys = (text) => text.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
  const renumber = () => {
    rows().forEach(({ li, paths, keys }, i) => {
      paths.setAttribute("aria-label", t("src.readers.paths_n", { n: i + 1 }));
      keys.setAttribute("aria-label", t("src.readers.keys_n", { n: i + 1 }));
      li.querySelector("button").setAttribute("aria-label", t("src.readers.remove_rule_n", { n: i + 1 }));
    });
    head.hidden = !rulesBox.children.length;
  };
  const ruleRow = (rule) => {
    const paths = textInput("paths", { value: rule?.paths || "", placeholder: "hr/**", "aria-label": t("src.readers.paths") });
    const keys = textInput("readers", { value: (rule?.readers || []).join(", "), placeholder: "group:hr, user:ann", "aria-label": t("src.readers.keys") });
    const li = h("li", { class: "src-rule-row", dataset: { testid: "readers-rule-row" } });
    const remove = h("button", { class: "btn btn-icon btn-small", type: "button", title: t("src.readers.remove_rule"), onclick: () => {
      const next = li.nextElementSibling || li.previousElementSibling;
      li.remove();
      renumber();
      (next?.querySelector("input") || addRule).focus();
    } }, icon("close"));
    li.append(paths, h("span", { class: "src-rule-arrow", "aria-hidden": "true" }, "→"), keys, remove);
    return li;
  };
  for (const r of m?.rules || []) rulesBox.append(ruleRow(r));
  const addRule = h("button", { class: "btn btn-small", type: "button", dataset: { testid: "readers-add-rule" }, onclick: () => {
    const li = ruleRow(null);
    rulesBox.append(li);
    renumber();
    li.querySelector("input").focus();
  } }, icon("plus"), t("src.readers.add_rule"));
  renumber();
  const co = h("input", { type: "checkbox", id: uid("src-codeowners"), checked: !!m?.codeowners });
  const coHint = h("span", { class: "hint", id: `${co.id}-hint` }, t("src.readers.codeowners_hint"));
  co.setAttribute("aria-describedby", coHint.id);

  const value = () => {
    const rules = [];
    for (const { paths, keys } of rows()) {
      const p = paths.value.trim();
      const readers = splitKeys(keys.value);
      if (!p && !readers.length) continue; // an empty row is left out
      rules.push({ paths: p, readers });
    }
    return { rules, codeowners: co.checked };
  };
  const clear = () => {
    error.textContent = "";
    for (const el of rulesBox.querySelectorAll("input")) {
      el.removeAttribute("aria-invalid");
      el.removeAttribute("aria-describedby");
    }
  };
  return {
    parts: [
      h("p", { class: "hint" }, t("src.readers.help")),
      head,
      rulesBox,
      h("div", { class: "row" }, addRule),
      h("div", { class: "field src-watch" }, h("label", { class: "switch", for: co.id }, co, t("src.readers.codeowners_label")), coHint),
      error,
    ],
    value,
    isEmpty: () => !value().rules.length && !co.checked,
    // The API's words (or their translation, i18n/server.json) for a rule or a reader.
    owns: (message) => /\breaders?\b|\brules?\b|CODEOWNERS|读者|规则/i.test(String(message || "")),
    clear,
    fail(message) {
      clear();
      error.textContent = message;
      // The rule the message names, by a reader key or a glob in quotes: its field is marked.
      const named = /["“]([^"”]+)["”]/.exec(String(message || ""))?.[1];
      let at = null;
      if (named) {
        for (const { paths, keys } of rows()) {
          if (splitKeys(keys.value).includes(named)) at = keys;
          else if (paths.value.trim() === named || paths.value.split(",").some((g) => g.trim() === named)) at = paths;
          if (at) break;
        }
      }
      if (at) {
        at.setAttribute("aria-invalid", "true");
        at.setAttribute("aria-describedby", error.id);
      }
      (at || rulesBox.querySelector("input") || addRule).focus();
    },
  };
}

/** The field that says where a source of `kind` is. */
const MAIN_FIELD = { git: "url", s3: "url", webdav: "url", site: "sitemap", folder: "path" };

/** Which field of the form an API message is about (null: the form as a whole). */
function fieldOfMessage(message, kind) {
  const m = String(message || "");
  if (/\bmask\b|\bglob\b/i.test(m)) return "mask";
  if (/interval/i.test(m)) return "interval";
  if (kind === "git" && /\bbranch\b/i.test(m)) return "branch";
  if (kind === "git" && /inside the repository/i.test(m)) return "path";
  if (kind === "s3" && /\bendpoint\b/i.test(m)) return "endpoint";
  if (kind === "s3" && /\bregion\b/i.test(m)) return "region";
  if (/\bURL\b|location|sitemap|\bhost\b|s3:\/\/|directory|absolute path|own disk|needs "/i.test(m)) return MAIN_FIELD[kind] || null;
  if (/credential|QUARRY_SECRET_KEY|password|user name/i.test(m)) return "secret";
  return null;
}

/** A question shown in a dialog: its words on one line, at most this many characters. */
const QUESTION_MAX = 280;

/**
 * The Add source dialog. `question`: the unanswered question it is for (the Insight page's
 * "Add a source"), shown as text above the form; `onClose` runs once it closes, added or not.
 */
function addSourceDialog({ kb, session, onAdded, question, onClose }) {
  const d = openDialog({ title: t("src.add_title", { name: kb.name }), wide: true, onClose });
  d.dialog.classList.add("src-dialog");
  d.dialog.dataset.testid = "add-source";
  const asked = String(question || "").replace(/\s+/g, " ").trim();
  // Typed by whoever asked it: text only (t() fills it in, h() makes a text node of it).
  const forQuestion = asked
    ? h(
        "p",
        { class: "src-for-question", id: uid("src-for"), dataset: { testid: "add-source-question" } },
        t("src.for_question", { question: asked.length > QUESTION_MAX ? `${asked.slice(0, QUESTION_MAX - 1)}…` : asked }),
      )
    : null;
  if (forQuestion) d.dialog.setAttribute("aria-describedby", forQuestion.id);
  const formId = uid("src-add");
  // The folder kind only for the machine's owner (the API refuses it to anyone else); a
  // session that does not say offers it and shows the API's refusal.
  const folderAllowed = session?.machine_owner !== false;
  const kinds = KINDS.filter((k) => k !== "folder" || folderAllowed);
  const radioName = uid("src-kind");
  const radios = kinds.map((k) => {
    const id = uid("src-kind");
    return h("div", { class: "src-seg-item" }, h("input", { type: "radio", name: radioName, id, value: k, checked: k === "git" }), h("label", { for: id }, kindName(k)));
  });
  const kindSet = h("fieldset", { class: "src-seg" }, h("legend", {}, t("src.f.kind")), h("div", { class: "src-seg-items" }, radios));
  const folderNote = folderAllowed ? null : h("p", { class: "hint src-owner-note", dataset: { testid: "folder-owner-only" } }, t("src.folder_owner_only"));

  // One group of fields per kind; only the chosen kind's group shows.
  const F = {
    git: [
      formField("url", t("src.f.git_url"), textInput("url", { type: "url", placeholder: "https://git.example.com/team/handbook.git" }), { hint: t("src.hint.git_url"), required: true }),
      formField("branch", t("src.f.branch"), textInput("branch", { placeholder: t("src.ph.branch") })),
      formField("path", t("src.f.git_path"), textInput("path", { placeholder: "docs/handbook" }), { hint: t("src.hint.git_path") }),
    ],
    s3: [
      formField("url", t("src.f.s3_url"), textInput("url", { placeholder: "s3://team-docs/handbook" }), { hint: t("src.hint.s3_url"), required: true }),
      formField("endpoint", t("src.f.endpoint"), textInput("endpoint", { type: "url", placeholder: "https://minio.example.com:9000" }), { hint: t("src.hint.endpoint") }),
      formField("region", t("src.f.region"), textInput("region", { placeholder: "us-east-1" })),
    ],
    webdav: [formField("url", t("src.f.dav_url"), textInput("url", { type: "url", placeholder: "https://cloud.example.com/remote.php/dav/files/me/Handbook" }), { hint: t("src.hint.dav_url"), required: true })],
    site: [formField("sitemap", t("src.f.sitemap"), textInput("sitemap", { type: "url", placeholder: "https://docs.example.com/sitemap.xml" }), { hint: t("src.hint.sitemap"), required: true })],
    folder: [formField("path", t("src.f.folder_path"), textInput("path", { placeholder: "/srv/policies" }), { hint: t("src.hint.folder_path"), required: true })],
  };
  // A folder may also sync on change, where the server's API has `watch` (offered once its
  // description says so; sent only when asked for).
  const watch = watchBox(false);
  watch.el.hidden = true;
  addSourceFields().then((fields) => (watch.el.hidden = !fields.has("watch")));
  const groups = Object.fromEntries(
    Object.entries(F).map(([k, fs]) => [k, h("div", { class: "src-kind-fields", dataset: { kind: k }, hidden: k !== "git" }, fs.map((f) => f.el), k === "folder" ? watch.el : null)]),
  );
  const mask = formField("mask", t("src.f.mask"), textInput("mask", { placeholder: "**" }), { hint: t("src.hint.mask") });
  const schedule = scheduleField(null);
  const user = formField("username", t("src.cred.git_user"), textInput("username", { autocomplete: "off", placeholder: "x-access-token" }));
  const secret = formField("secret", t("src.cred.git_secret"), h("input", { type: "password", name: "secret", autocomplete: "new-password", spellcheck: "false" }));
  const credNote = h("p", { class: "src-cred-note", id: uid("src-cred-note") }, icon("lock"), t("src.cred.note"));
  secret.input.setAttribute("aria-describedby", `${credNote.id} ${secret.error.id}`);
  const credSet = h("fieldset", { class: "src-fieldset src-cred" }, h("legend", {}, t("src.cred.legend")), credNote, h("div", { class: "src-grid2" }, user.el, secret.el));
  // Who reads its documents: no rule and no CODEOWNERS sends no mapping (every reader of the
  // knowledge base), as the source's settings can set it later.
  const readers = readerRules(null);
  const readersSet = h(
    "fieldset",
    { class: "src-fieldset src-readers", dataset: { testid: "add-readers" } },
    h("legend", {}, t("src.readers.legend_optional")),
    h("p", { class: "hint" }, t("src.readers.add_hint")),
    readers.parts,
  );
  const syncAfter = h("input", { type: "checkbox", name: "sync_now", checked: true, id: uid("src-sync-after") });
  const error = h("p", { class: "form-error", role: "alert", dataset: { testid: "form-error" } });
  const form = h(
    "form",
    { id: formId, class: "kb-form src-form", novalidate: true },
    kindSet,
    folderNote,
    Object.values(groups),
    h("div", { class: "src-grid2" }, mask.el, schedule.el),
    credSet,
    readersSet,
    h("label", { class: "switch src-sync-after", for: syncAfter.id }, syncAfter, t("src.sync_after_add")),
    error,
  );
  const submit = h("button", { class: "btn btn-primary", type: "submit", form: formId }, icon("plus"), t("src.add_submit"));
  d.body.append(forQuestion || "", form);
  d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), submit);

  const kind = () => form.querySelector(`input[name="${radioName}"]:checked`).value;
  const syncKind = () => {
    const k = kind();
    for (const [name, g] of Object.entries(groups)) g.hidden = name !== k;
    credSet.hidden = k === "folder";
    if (CREDENTIAL_LABELS[k]) {
      replace(user.label, t(CREDENTIAL_LABELS[k][0]));
      replace(secret.label, t(CREDENTIAL_LABELS[k][1]));
      user.input.placeholder = k === "git" ? "x-access-token" : "";
    }
    clear();
  };
  kindSet.addEventListener("change", syncKind);

  const all = () => [...F[kind()], mask, ...schedule.fields, user, secret];
  function clear() {
    error.textContent = "";
    readers.clear();
    for (const fs of [...Object.values(F).flat(), mask, ...schedule.fields, user, secret]) {
      fs.error.textContent = "";
      fs.input.removeAttribute("aria-invalid");
    }
  }
  const fail = (message, key) => {
    clear();
    if (key === "readers") return readers.fail(message);
    const f = key && all().find((x) => x.key === key && !x.el.hidden);
    if (f) {
      f.error.textContent = message;
      f.input.setAttribute("aria-invalid", "true");
      f.input.focus();
    } else error.textContent = message;
  };

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const k = kind();
    const body = { kind: k };
    for (const f of F[k]) {
      const v = f.input.value.trim();
      if (v) body[f.key] = v;
      else if (f.input.getAttribute("aria-required")) return fail(t("src.required", { field: f.label.firstChild.textContent }), f.key);
    }
    if (mask.input.value.trim()) body.mask = mask.input.value.trim();
    if (k === "folder" && watch.input.checked) body.watch = true;
    try {
      const every = schedule.value();
      if (every !== null) body.interval_seconds = every;
    } catch (err) {
      return fail(err.message, err.field);
    }
    if (k !== "folder") {
      const token = secret.input.value;
      const name = user.input.value.trim();
      if (name && !token) return fail(t("src.cred.needs_secret"), "secret");
      if (token) body.credential = name ? { token, username: name } : { token };
    }
    if (!readers.isEmpty()) body.readers = readers.value();
    submit.disabled = true;
    clear();
    try {
      const s = await api("POST", sourcesUrl(kb.id), { body });
      secret.input.value = "";
      d.close();
      const msg = t("src.added", { where: describe(s.location) });
      toast(msg, "success");
      announce(msg);
      onAdded(s, { sync: syncAfter.checked });
    } catch (err) {
      submit.disabled = false;
      fail(err.message, body.readers && readers.owns(err.message) ? "readers" : fieldOfMessage(err.message, k));
    }
  });
  radios[0].querySelector("input").focus();
  syncKind();
}

// ---------------------------------------------------------------------------------------
// The Sources tab of a knowledge base

/**
 * Draws the knowledge base's sources into `panel`. `onSynced()` runs after a sync (the
 * documents table refreshes); `onCount(n)` after each load (the tab's label). `addNow`
 * (`#/kb/<id>/sources?add=1&question=…`, the Insight page's "Add a source"): the Add source
 * dialog opens at once, for `addNow.question` when there is one, and `addNow.onClose()` runs
 * once it closes; nothing opens for a viewer who may not add sources.
 */
export async function sourcesPanel(panel, { kb, kbKey, session, signal, onSynced, onCount, addNow }) {
  const can = rights(session);
  const list = h("div", { class: "src-list-wrap", "aria-busy": "true" }, h("p", { class: "loading" }, t("common.loading")));
  const add = can.admin
    ? h("button", { class: "btn btn-primary", type: "button", dataset: { testid: "add-source" }, onclick: () => addSourceDialog({ kb, session, onAdded }) }, icon("plus"), t("src.add"))
    : null;
  const refresh = h("button", { class: "btn", type: "button", onclick: () => poll.now() }, icon("refresh"), t("common.refresh"));
  replace(
    panel,
    h(
      "section",
      { class: "src-section", "aria-labelledby": "src-title" },
      h("div", { class: "kb-section-head" }, h("h2", { id: "src-title" }, t("src.title")), h("div", { class: "row" }, refresh, add)),
      h("p", { class: "muted src-intro" }, t("src.intro")),
      list,
    ),
  );

  let sources = null;
  const latest = new Map(); // id → the newest report (or null)
  const cards = new Map(); // id → {el, state, body, control, sig}
  const pendingSync = new Set(); // ids to sync once drawn (just added)

  /** A source's card; its sync control (button, result) lives as long as the card. */
  function makeCard(s) {
    const href = sourceHref(kbKey, s.id);
    const control = can.write ? syncControl({ source: s, signal, onDone: afterSync }) : null;
    const state = h("span", { class: "src-state-slot" });
    const body = h("div", { class: "src-card-body" });
    const el = h(
      "li",
      { class: "card src-card", dataset: { testid: "source-card", id: s.id, kind: s.location?.kind } },
      h(
        "div",
        { class: "src-card-head" },
        kindBadge(s.location?.kind),
        h("h3", { class: "src-where" }, h("a", { href, dataset: { testid: "source-link" } }, describe(s.location))),
        state,
      ),
      body,
      h("div", { class: "src-card-actions" }, control ? control.button : null, h("a", { class: "btn", href, "aria-label": t("src.open_named", { name: describe(s.location) }) }, t("src.open_details"))),
      control ? control.result : null,
    );
    return { el, state, body, control, sig: "" };
  }

  /** Fills a card with the source's state and its latest report (when they changed). */
  function fillCard(c, s) {
    const last = latest.get(s.id) || null;
    const sig = JSON.stringify([s, last]);
    if (c.sig === sig) return;
    c.sig = sig;
    const st = stateOf(s, last);
    c.el.dataset.state = st;
    replace(c.state, stateBadge(st));
    replace(
      c.body,
      facts([...stateRows(s, last), s.has_secret ? [t("src.f.credential"), t("src.cred.stored"), "credential"] : null]),
      failureBox(s),
      last && last.status !== "running"
        ? h("div", { class: "src-latest", dataset: { testid: "latest-report" } }, h("span", { class: "src-latest-label" }, t("src.latest_report", { date: fmtDate(last.started_at) })), countBadges(last))
        : null,
    );
  }

  function draw() {
    list.removeAttribute("aria-busy");
    if (!sources.length) {
      cards.clear();
      replace(list, emptyState(can.admin ? t("src.empty_admin") : t("src.empty"), add ? h("button", { class: "btn btn-primary", type: "button", onclick: () => add.click() }, icon("plus"), t("src.add")) : null));
      return;
    }
    let ul = list.querySelector("ul.src-list");
    if (!ul) {
      ul = h("ul", { class: "src-list", "aria-label": t("src.list_label") });
      replace(list, ul);
    }
    const want = sources.map((s) => {
      let c = cards.get(s.id);
      if (!c) cards.set(s.id, (c = makeCard(s)));
      fillCard(c, s);
      return c.el;
    });
    for (const id of [...cards.keys()]) if (!sources.some((s) => s.id === id)) cards.delete(id);
    const now = [...ul.children];
    if (want.length !== now.length || want.some((el, i) => el !== now[i])) ul.replaceChildren(...want);
    for (const id of pendingSync) {
      pendingSync.delete(id);
      const c = cards.get(id);
      if (c?.control) {
        c.control.button.focus();
        c.control.run();
      }
    }
  }

  async function load() {
    const fresh = await api("GET", sourcesUrl(kb.id), { signal });
    const reports = await Promise.all(
      fresh.map((s) => api("GET", `${sourceUrl(s.id)}/reports`, { query: { limit: 1 }, signal }).then((r) => r[0] || null, () => null)),
    );
    sources = fresh;
    latest.clear();
    fresh.forEach((s, i) => latest.set(s.id, reports[i]));
    draw();
    if (onCount) onCount(fresh.length, fresh.filter((s) => stateOf(s, latest.get(s.id)) === "failing").length);
    return [...latest.values()].some((r) => r?.status === "running");
  }
  const poll = repeater(signal, load);

  function onAdded(s, { sync }) {
    if (sync && can.write) pendingSync.add(s.id);
    poll.now();
  }
  function afterSync(out) {
    poll.now();
    if (out.running) poll.later();
    if (onSynced) onSynced(out);
  }

  if (addNow && add) {
    addSourceDialog({
      kb,
      session,
      onAdded,
      question: addNow.question,
      onClose: () => {
        // Back to the button that opens it again (a new source's "Sync now" takes the focus
        // once drawn); the address loses the request.
        if (add.isConnected && !signal.aborted) add.focus();
        addNow.onClose?.();
      },
    });
  }

  try {
    if (await load()) poll.later();
  } catch (e) {
    if (signal.aborted || e.name === "AbortError") return;
    replace(list, errorBlock(e, () => poll.now()));
    list.removeAttribute("aria-busy");
  }
}

// ---------------------------------------------------------------------------------------
// #/kb/<kb>/sources/<id>: one source

export async function sourcePage({ root, params, signal, session }) {
  const kbKey = params[0];
  const id = params[2];
  const can = rights(session);
  const kbHref = `#/kb/${encodeURIComponent(kbKey)}`;
  const crumbs = (kbName, here) =>
    h(
      "nav",
      { class: "kb-crumbs", "aria-label": t("kb.breadcrumb") },
      h("a", { href: "#/kb" }, t("kb.title")),
      h("span", { "aria-hidden": "true" }, " / "),
      h("a", { href: kbHref }, kbName),
      h("span", { "aria-hidden": "true" }, " / "),
      h("a", { href: `${kbHref}/sources` }, t("src.title")),
      here ? [h("span", { "aria-hidden": "true" }, " / "), h("span", { "aria-current": "page" }, here)] : null,
    );
  replace(root, h("p", { class: "loading" }, t("common.loading")));

  let s;
  try {
    s = await api("GET", sourceUrl(id), { signal });
  } catch (e) {
    if (signal.aborted || e.name === "AbortError") return;
    replace(root, crumbs(kbKey), h("div", { class: "page-head" }, h("h1", {}, t("src.page_title"))), errorBlock(e.status === 404 ? new ApiError(404, t("src.not_found")) : e, () => navigate(location.hash)));
    root.dataset.ready = "true";
    return;
  }
  let reports = [];
  let limit = REPORTS_FIRST;
  const kind = s.location?.kind;

  // --- Header ---------------------------------------------------------------------------
  const title = h("h1", { class: "src-title" }, describe(s.location));
  document.title = `${describe(s.location)} · Quarry`;
  const sync = can.write ? syncControl({ source: s, signal, onDone: afterSync }) : null;
  if (sync) sync.button.classList.add("btn-primary");
  const detach = can.admin
    ? h("button", { class: "btn btn-danger", type: "button", dataset: { testid: "detach" }, onclick: () => detachDialog() }, icon("trash"), t("src.detach"))
    : null;
  const head = h("div", { class: "page-head" }, h("div", { class: "src-title-wrap" }, kindBadge(kind), title), h("div", { class: "page-actions" }, sync ? sync.button : null, detach));
  const summary = h("section", { class: "card src-summary", "aria-labelledby": "src-state-title" });

  const drawSummary = () => {
    const last = reports[0] || null;
    replace(
      summary,
      h("div", { class: "kb-section-head" }, h("h2", { id: "src-state-title" }, t("src.state_title")), stateBadge(stateOf(s, last))),
      facts([
        ...stateRows(s, last),
        [t("src.f.last_success"), s.last_success_at ? when(s.last_success_at) : "—", "last-success"],
        [t("src.f.failures"), fmtNumber(s.failures || 0), "failures"],
        [t("src.f.created"), fmtDate(s.created_at)],
      ]),
      failureBox(s),
    );
    summary.dataset.state = stateOf(s, last);
  };

  // --- Settings -------------------------------------------------------------------------
  const settings = h("section", { class: "card src-settings", "aria-labelledby": "src-settings-title" });
  const drawSettings = () => {
    const where = facts(locationRows(s.location), "src-where-facts");
    if (!can.admin) {
      replace(
        settings,
        h("h2", { id: "src-settings-title" }, t("src.settings")),
        where,
        facts([
          [t("src.f.mask"), h("code", {}, s.mask)],
          [t("src.f.schedule"), fmtInterval(s.interval_seconds)],
          typeof s.watch === "boolean" && kind === "folder" ? [t("src.f.watch"), s.watch ? t("src.watch.on") : t("src.watch.off")] : null,
          kind !== "folder" ? [t("src.f.credential"), s.has_secret ? t("src.cred.stored") : t("src.cred.none")] : null,
        ]),
        h("div", { class: "src-fieldset src-readers", dataset: { testid: "readers-view" } }, h("h3", {}, t("src.readers.title")), mappingList(s.readers)),
      );
      return;
    }
    replace(settings, h("h2", { id: "src-settings-title" }, t("src.settings")), where, settingsForm(), kind !== "folder" ? credentialForm() : null, readersForm());
  };

  function settingsForm() {
    const formId = uid("src-set");
    const mask = formField("mask", t("src.f.mask"), textInput("mask", { value: s.mask }), { hint: t("src.hint.mask") });
    const schedule = scheduleField(s.interval_seconds);
    // Syncing on change is a folder's, where the API has it (the source says `watch`).
    const watch = kind === "folder" && typeof s.watch === "boolean" ? watchBox(s.watch) : null;
    const error = h("p", { class: "form-error", role: "alert", dataset: { testid: "settings-error" } });
    const save = h("button", { class: "btn btn-primary", type: "submit" }, t("common.save"));
    const fields = [mask, ...schedule.fields];
    const fail = (message, key) => {
      error.textContent = "";
      for (const f of fields) {
        f.error.textContent = "";
        f.input.removeAttribute("aria-invalid");
      }
      const f = key && fields.find((x) => x.key === key && !x.el.hidden);
      if (f) {
        f.error.textContent = message;
        f.input.setAttribute("aria-invalid", "true");
        f.input.focus();
      } else error.textContent = message;
    };
    const form = h(
      "form",
      { id: formId, class: "kb-form src-form", novalidate: true, dataset: { testid: "settings-form" } },
      h("div", { class: "src-grid2" }, mask.el, schedule.el),
      watch ? watch.el : null,
      error,
      h("div", { class: "row" }, save),
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const body = {};
      const m = mask.input.value.trim();
      if (m !== s.mask) body.mask = m;
      if (watch && watch.input.checked !== s.watch) body.watch = watch.input.checked;
      try {
        const every = schedule.value();
        if (every !== (s.interval_seconds ?? null)) body.interval_seconds = every;
      } catch (err) {
        return fail(err.message, err.field);
      }
      if (!Object.keys(body).length) {
        fail("", null);
        toast(t("src.nothing_changed"), "info");
        return;
      }
      save.disabled = true;
      fail("", null);
      try {
        s = await api("PATCH", sourceUrl(s.id), { body });
        toast(t("src.saved"), "success");
        announce(t("src.saved"));
        drawSummary();
        drawSettings();
      } catch (err) {
        save.disabled = false;
        fail(err.message, fieldOfMessage(err.message, kind));
      }
    });
    return form;
  }

  /** The reader mapping: rules (globs → keys) in order, CODEOWNERS; saved or cleared. */
  function readersForm() {
    const m = s.readers;
    const rules = readerRules(m);
    const save = h("button", { class: "btn btn-primary", type: "submit" }, t("src.readers.save"));
    const clear = m
      ? h("button", { class: "btn btn-danger", type: "button", dataset: { testid: "readers-clear" }, onclick: () => clearMapping() }, t("src.readers.clear"))
      : null;
    const form = h(
      "form",
      { class: "kb-form src-form", novalidate: true, dataset: { testid: "readers-form" } },
      h(
        "fieldset",
        { class: "src-fieldset src-readers" },
        h("legend", {}, t("src.readers.title")),
        h("p", { class: "src-readers-state", dataset: { testid: "readers-state" } }, mappingSummary(m)),
        rules.parts,
        h("div", { class: "row" }, save, clear),
      ),
    );
    const done = (msg) => {
      toast(msg, "success");
      announce(msg);
      drawSummary();
      drawSettings();
    };
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      rules.clear();
      save.disabled = true;
      try {
        s = await api("PATCH", sourceUrl(s.id), { body: { readers: rules.value() } });
        done(t("src.readers.saved"));
      } catch (err) {
        save.disabled = false;
        rules.fail(err.message);
        announce(err.message, { assertive: true });
      }
    });
    async function clearMapping() {
      if (!(await confirmDialog(t("src.readers.clear_confirm"), { danger: true, confirmLabel: t("src.readers.clear") }))) return;
      try {
        s = await api("PATCH", sourceUrl(s.id), { body: { readers: null } });
        done(t("src.readers.cleared"));
      } catch (err) {
        rules.fail(err.message);
        announce(err.message, { assertive: true });
      }
    }
    return form;
  }

  function credentialForm() {
    const labels = CREDENTIAL_LABELS[kind] || CREDENTIAL_LABELS.git;
    const user = formField("username", t(labels[0]), textInput("username", { placeholder: kind === "git" ? "x-access-token" : "" }));
    const secret = formField("secret", t(labels[1]), h("input", { type: "password", name: "secret", autocomplete: "new-password", spellcheck: "false" }));
    const error = h("p", { class: "form-error", role: "alert", dataset: { testid: "credential-error" } });
    const save = h("button", { class: "btn", type: "submit" }, s.has_secret ? t("src.cred.replace") : t("src.cred.set"));
    const forget = s.has_secret
      ? h("button", { class: "btn btn-danger", type: "button", dataset: { testid: "forget-credential" }, onclick: () => forgetCredential() }, t("src.cred.forget"))
      : null;
    const note = h("p", { class: "src-cred-note", id: uid("src-cred-note") }, icon("lock"), t("src.cred.note"));
    secret.input.setAttribute("aria-describedby", `${note.id} ${secret.error.id}`);
    const fail = (message, key) => {
      error.textContent = "";
      for (const f of [user, secret]) {
        f.error.textContent = "";
        f.input.removeAttribute("aria-invalid");
      }
      const f = key === "secret" ? secret : null;
      if (f && message) {
        f.error.textContent = message;
        f.input.setAttribute("aria-invalid", "true");
        f.input.focus();
      } else error.textContent = message;
    };
    const form = h(
      "form",
      { class: "kb-form src-form", novalidate: true, dataset: { testid: "credential-form" } },
      h(
        "fieldset",
        { class: "src-fieldset src-cred" },
        h("legend", {}, t("src.f.credential")),
        h("p", { class: "src-cred-state", dataset: { testid: "credential-state" } }, s.has_secret ? t("src.cred.stored_long") : t("src.cred.none_long")),
        note,
        h("div", { class: "src-grid2" }, user.el, secret.el),
        error,
        h("div", { class: "row" }, save, forget),
      ),
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const token = secret.input.value;
      const name = user.input.value.trim();
      if (!token) return fail(name ? t("src.cred.needs_secret") : t("src.cred.enter_secret"), "secret");
      save.disabled = true;
      fail("", null);
      try {
        s = await api("PATCH", sourceUrl(s.id), { body: { credential: name ? { token, username: name } : { token } } });
        secret.input.value = "";
        toast(t("src.cred.saved"), "success");
        announce(t("src.cred.saved"));
        drawSettings();
      } catch (err) {
        save.disabled = false;
        fail(err.message, "secret");
      }
    });
    async function forgetCredential() {
      if (!(await confirmDialog(t("src.cred.forget_confirm"), { danger: true, confirmLabel: t("src.cred.forget") }))) return;
      try {
        s = await api("PATCH", sourceUrl(s.id), { body: { credential: null } });
        toast(t("src.cred.forgotten"), "success");
        announce(t("src.cred.forgotten"));
        drawSettings();
      } catch (err) {
        fail(err.message, null);
      }
    }
    return form;
  }

  // --- Reports ----------------------------------------------------------------------------
  const reportsBox = h("div", { class: "src-reports-box", "aria-busy": "true" }, h("p", { class: "loading" }, t("common.loading")));
  const more = h("button", { class: "btn btn-small", type: "button", hidden: true, onclick: () => ((limit = REPORTS_MAX), poll.now()) }, t("src.more_reports"));
  const reportsSection = h(
    "section",
    { class: "src-reports-section", "aria-labelledby": "src-reports-title" },
    h("div", { class: "kb-section-head" }, h("h2", { id: "src-reports-title" }, t("src.reports")), h("button", { class: "btn btn-small", type: "button", onclick: () => poll.now() }, icon("refresh"), t("common.refresh"))),
    reportsBox,
    more,
  );
  const items = new Map(); // report id → {el, sig}
  const opened = new Set(); // report ids the reader opened (or that are new)
  let firstDraw = true;

  const drawReports = () => {
    reportsBox.removeAttribute("aria-busy");
    more.hidden = limit >= REPORTS_MAX || reports.length < limit;
    if (!reports.length) {
      items.clear();
      replace(reportsBox, emptyState(can.write ? t("src.no_reports_write") : t("src.no_reports")));
      return;
    }
    if (firstDraw) opened.add(reports[0].id);
    firstDraw = false;
    let ol = reportsBox.querySelector("ol.src-reports");
    if (!ol) {
      ol = h("ol", { class: "src-reports", "aria-label": t("src.reports") });
      replace(reportsBox, ol);
    }
    const want = reports.map((r) => {
      const sig = JSON.stringify([r.status, r.finished_at, r.counts, r.error]);
      const old = items.get(r.id);
      if (old && old.sig === sig) return old.el;
      const el = reportItem(r, opened);
      items.set(r.id, { el, sig });
      return el;
    });
    const now = [...ol.children];
    if (want.length !== now.length || want.some((el, i) => el !== now[i])) ol.replaceChildren(...want);
  };

  // --- Detach -----------------------------------------------------------------------------
  function detachDialog() {
    const d = openDialog({ title: t("src.detach_title") });
    d.dialog.classList.add("src-dialog");
    d.dialog.dataset.testid = "detach-dialog";
    const name = uid("src-keep");
    const choice = (value, label, hint, checked) => {
      const rid = uid("src-keep");
      return h("div", { class: "src-choice" }, h("input", { type: "radio", name, id: rid, value, checked }), h("label", { for: rid }, label, h("span", { class: "hint" }, hint)));
    };
    const error = h("p", { class: "form-error", role: "alert" });
    d.body.append(
      h("p", {}, t("src.detach_question", { where: describe(s.location), kb: s.knowledge_base })),
      h(
        "fieldset",
        { class: "src-fieldset src-choices" },
        h("legend", {}, tn("src.detach_docs", { n: fmtNumber(s.documents) })),
        choice("false", t("src.detach_delete"), t("src.detach_delete_hint"), true),
        choice("true", t("src.detach_keep"), t("src.detach_keep_hint"), false),
      ),
      error,
    );
    const go = h("button", { class: "btn btn-danger", type: "button" }, t("src.detach"));
    d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), go);
    d.body.querySelector(`input[name="${name}"]`).focus();
    go.addEventListener("click", async () => {
      const keep = d.body.querySelector(`input[name="${name}"]:checked`).value;
      go.disabled = true;
      error.textContent = "";
      try {
        const out = await api("DELETE", sourceUrl(s.id), { query: { keep_documents: keep } });
        d.close();
        const msg = out.documents_kept ? tn("src.detached_kept", { n: fmtNumber(out.documents) }) : tn("src.detached_deleted", { n: fmtNumber(out.documents) });
        toast(msg, "success");
        announce(msg);
        navigate(`${kbHref}/sources`);
      } catch (err) {
        go.disabled = false;
        error.textContent = err.message;
      }
    });
  }

  // --- Loading ----------------------------------------------------------------------------
  async function load() {
    // The reports first, then the source: a sync ends its report after its documents are in,
    // so a finished report never shows beside the source's counts from before the sync.
    const list = await api("GET", `${sourceUrl(id)}/reports`, { query: { limit }, signal });
    const fresh = await api("GET", sourceUrl(id), { signal });
    const settingsChanged = fresh.mask !== s.mask || fresh.interval_seconds !== s.interval_seconds || fresh.has_secret !== s.has_secret || fresh.watch !== s.watch || JSON.stringify(fresh.readers ?? null) !== JSON.stringify(s.readers ?? null);
    s = fresh;
    reports = list;
    drawSummary();
    // The settings form is redrawn only when they changed elsewhere (what is typed stays).
    if (settingsChanged) drawSettings();
    drawReports();
    return reports[0]?.status === "running";
  }
  const poll = repeater(signal, load);

  function afterSync(out) {
    if (out.ok) opened.add(out.report.id);
    poll.now();
    if (out.running) poll.later();
  }

  drawSummary();
  drawSettings();
  replace(root, crumbs(s.knowledge_base, describe(s.location)), head, sync ? sync.result : null, summary, settings, reportsSection);
  root.classList.add("src-page");
  try {
    if (await load()) poll.later();
  } catch (e) {
    if (signal.aborted || e.name === "AbortError") return;
    replace(reportsBox, errorBlock(e, () => poll.now()));
    reportsBox.removeAttribute("aria-busy");
  }
  root.dataset.ready = "true";
}

/** Where a source is, field by field. */
function locationRows(loc) {
  if (!loc) return [];
  const rows = [[t("src.f.kind"), kindName(loc.kind), "kind"]];
  const add = (key, value) => value && rows.push([t(`src.loc.${key}`), h("code", {}, value), `loc-${key}`]);
  switch (loc.kind) {
    case "git":
      add("url", loc.url);
      rows.push([t("src.loc.branch"), loc.branch ? h("code", {}, loc.branch) : t("src.loc.default_branch"), "loc-branch"]);
      add("path", loc.path);
      break;
    case "s3":
      add("bucket", loc.bucket);
      add("prefix", loc.prefix);
      add("endpoint", loc.endpoint);
      add("region", loc.region);
      break;
    case "webdav":
      add("url", loc.url);
      break;
    case "site":
      add("sitemap", loc.sitemap);
      break;
    case "folder":
      add("folder", loc.path);
      break;
    default:
      break;
  }
  return rows;
}

/** One report: a `<details>` whose summary says when, how it ended and its counts; opened,
 * it lists the per-file lines (filterable by action). */
function reportItem(r, opened) {
  const took = r.finished_at ? fmtSpan((r.finished_at - r.started_at) / 1000) : null;
  const summary = h(
    "summary",
    { class: "src-report-summary" },
    h(
      "span",
      { class: "src-report-when" },
      reportStatusBadge(r.status),
      h("span", {}, fmtDate(r.started_at)),
      r.status === "running" ? h("span", { class: "muted" }, t("src.report.running_since", { ago: fmtAgo(r.started_at) })) : took ? h("span", { class: "muted" }, t("src.report.took", { span: took })) : null,
      r.revision ? h("code", { class: "src-rev", title: r.revision }, r.revision.slice(0, 12)) : null,
    ),
    countBadges(r),
  );
  const body = h("div", { class: "src-report-body" });
  const details = h("details", { class: "src-report-details" }, summary, body);
  let drawn = false;
  const fill = () => {
    if (drawn) return;
    drawn = true;
    const lines = r.details || [];
    const c = r.counts || {};
    const listed = ACTIONS.reduce((n, a) => n + (c[a] || 0), 0);
    replace(
      body,
      r.error ? h("div", { class: "error-block src-report-error", dataset: { testid: "report-error" } }, h("p", {}, serverText(r.error))) : null,
      lines.length ? linesTable(lines, r) : h("p", { class: "muted" }, r.status === "running" ? t("src.report.running_lines") : t("src.report.no_lines")),
      lines.length && listed > lines.length ? h("p", { class: "muted src-lines-cut" }, t("src.report.lines_cut", { n: fmtNumber(lines.length), total: fmtNumber(listed) })) : null,
    );
  };
  details.addEventListener("toggle", () => {
    if (details.open) {
      opened.add(r.id);
      fill();
    } else opened.delete(r.id);
  });
  if (opened.has(r.id)) {
    details.open = true;
    fill();
  }
  return h("li", { class: "src-report", dataset: { testid: "report", id: r.id, status: r.status } }, details);
}

function linesTable(lines, r) {
  const present = ACTIONS.filter((a) => lines.some((l) => l.action === a));
  const tbody = h("tbody");
  const drawRows = (action) =>
    tbody.replaceChildren(
      ...lines
        .filter((l) => !action || l.action === action)
        .map((l) =>
          h(
            "tr",
            { dataset: { testid: "report-line", action: l.action, path: l.path } },
            h("td", { class: "src-line-action" }, h("span", { class: `badge ${COUNT_BADGE[l.action] || ""}` }, ACTIONS.includes(l.action) ? t(`src.action.${l.action}`) : l.action)),
            h("td", { class: "src-line-path" }, l.path),
            h("td", { class: "src-line-detail" }, l.detail ? (l.action === "renamed" ? t("src.line.renamed_from", { path: l.detail.replace(/^from /, "") }) : serverText(l.detail)) : ""),
          ),
        ),
    );
  drawRows("");
  const filterId = uid("src-filter");
  const filter =
    present.length > 1
      ? h(
          "div",
          { class: "kb-filter src-lines-filter" },
          h("label", { for: filterId }, t("src.report.show")),
          h(
            "select",
            { id: filterId, onchange: (e) => drawRows(e.target.value) },
            h("option", { value: "" }, t("src.report.all_lines", { n: fmtNumber(lines.length) })),
            present.map((a) => h("option", { value: a }, t("src.report.only", { action: t(`src.action.${a}`), n: fmtNumber(lines.filter((l) => l.action === a).length) }))),
          ),
        )
      : null;
  return h(
    "div",
    { class: "src-lines" },
    filter,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "src-lines-table" },
        h("caption", { class: "sr-only" }, t("src.report.lines_caption", { date: fmtDate(r.started_at) })),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, t("src.col.action")), h("th", { scope: "col" }, t("src.col.path")), h("th", { scope: "col" }, t("src.col.detail")))),
        tbody,
      ),
    ),
  );
}
