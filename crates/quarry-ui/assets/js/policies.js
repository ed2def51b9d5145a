// `#/policies`: a space's tool policies (issue 45): which tool calls are refused, and which
// wait for a person's approval (the inbox is `#/approvals`, js/approvals.js).
//
// Routes: `GET/POST /api/v1/policies`, `GET/PATCH/DELETE /api/v1/policies/{id}`. A policy:
// `{id, name, applies_to: {"space": true} | {"endpoint": name} | {"token": id}, tools: [pattern],
// when: null | predicate, effect: "deny" | "require_approval", approval_ttl_secs, version,
// created_by, created_at, updated_at}`. `when` is edited as JSON (checked here before it is
// sent); the server's 400 says which field is wrong, and its words show beside the form with
// nothing typed lost. Only the space's admins (and the machine's owner) see the controls.

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
  fmtDate,
  pageHeader,
  emptyState,
  errorBlock,
  dataTable,
} from "./app.js";
import { isSpaceAdmin, itemsOf, unwrap } from "./approvals.js";

const BASE = "/api/v1/policies";
const DEFAULT_TTL = 3600;
const TARGETS = ["space", "endpoint", "token"];
const EFFECTS = ["require_approval", "deny"];
const FIELDS = ["approval_ttl_secs", "applies_to", "endpoint", "token", "effect", "tools", "when", "name"];
/** The longest an approval may wait (quarry-policy's MAX_APPROVAL_TTL_SECS: seven days). */
const MAX_TTL = 7 * 24 * 3600;
const WHEN_EXAMPLE = '{"argument": "path", "operator": "under", "value": "/srv/prod"}';

function isAbort(e) {
  return e && (e.name === "AbortError" || e.code === "aborted");
}

let seq = 0;
function uid(prefix) {
  seq += 1;
  return `${prefix}-${seq}`;
}

/** What a policy is attached to: ["space"|"endpoint"|"token", target or ""]. */
function targetOf(p) {
  const a = p.applies_to || {};
  if (a.endpoint !== undefined && a.endpoint !== null) return ["endpoint", String(a.endpoint)];
  if (a.token !== undefined && a.token !== null) return ["token", String(a.token)];
  return ["space", ""];
}

function appliesText(p) {
  const [kind, id] = targetOf(p);
  return kind === "space" ? t("pol.applies.space_short") : t(`pol.applies.${kind}_named`, { id });
}

/** A predicate in words, as the server describes it in refusals (quarry-policy's
 * `Predicate::describe`): `path under /srv`, `a eq 1 and not (b exists)`. */
export function predicateText(w) {
  if (w === null || w === undefined) return "";
  if (typeof w !== "object" || Array.isArray(w)) return JSON.stringify(w);
  const join = (items, sep) =>
    items.map((p) => (p && typeof p === "object" && (Array.isArray(p.and) || Array.isArray(p.or)) ? `(${predicateText(p)})` : predicateText(p))).join(sep);
  if (Array.isArray(w.and)) return join(w.and, " and ");
  if (Array.isArray(w.or)) return join(w.or, " or ");
  if (w.not !== undefined) return `not (${predicateText(w.not)})`;
  if (w.argument !== undefined && w.operator) {
    const arg = Array.isArray(w.argument) ? w.argument.join("|") : String(w.argument);
    const v = w.value;
    const value =
      v === undefined || v === null
        ? ""
        : typeof v === "string"
          ? v
          : Array.isArray(v)
            ? v.map((i) => (typeof i === "string" ? i : JSON.stringify(i))).join(", ")
            : JSON.stringify(v);
    return `${arg} ${w.operator} ${value}`.trimEnd();
  }
  return JSON.stringify(w);
}

function effectBadge(effect) {
  const cls = effect === "deny" ? "badge-danger" : effect === "require_approval" ? "badge-warn" : "";
  return h("span", { class: `badge ${cls}`.trim(), dataset: { testid: "policy-effect", effect } }, EFFECTS.includes(effect) ? t(`pol.effect.${effect}`) : String(effect));
}

/** 3600 → "1 h", 90 → "1 min 30 s". */
function fmtTtl(secs) {
  const n = Number(secs);
  if (!Number.isFinite(n) || n <= 0) return "—";
  const d = Math.floor(n / 86400);
  const hh = Math.floor((n % 86400) / 3600);
  const m = Math.floor((n % 3600) / 60);
  const s = Math.floor(n % 60);
  const parts = [];
  if (d) parts.push(t("pol.ttl.d", { n: d }));
  if (hh) parts.push(t("pol.ttl.h", { n: hh }));
  if (m) parts.push(t("pol.ttl.m", { n: m }));
  if (s) parts.push(t("pol.ttl.s", { n: s }));
  return parts.join(" ");
}

// ---------------------------------------------------------------------------------------
// Page

export async function render({ root, query, signal, session }) {
  const admin = isSpaceAdmin(session);
  const highlight = query.get("id");
  const state = { items: [] };

  const createBtn = admin
    ? h("button", { class: "btn btn-primary", type: "button", onclick: () => policyDialog(null) }, icon("plus"), t("pol.new"))
    : null;
  const list = h("div", { class: "pol-list", "aria-live": "polite", dataset: { testid: "policies-list" } });
  replace(
    root,
    pageHeader(t("pol.title"), h("a", { class: "btn", href: "#/approvals" }, t("pol.approvals_link")), createBtn),
    h(
      "div",
      { class: "ap-intro" },
      h("p", { class: "muted" }, t("pol.intro")),
      h("p", { class: "muted", dataset: { testid: "policies-role-hint" } }, admin ? t("pol.admin_hint") : t("pol.read_hint")),
    ),
    list,
  );

  async function load() {
    list.setAttribute("aria-busy", "true");
    try {
      state.items = itemsOf(await api("GET", BASE, { signal }));
      draw();
    } catch (e) {
      if (signal.aborted || isAbort(e)) return;
      // Only those who govern the space read its policies: a refusal is a notice, not a fault.
      replace(list, e.status === 403 ? emptyState(e.message) : errorBlock(e, load));
    } finally {
      list.removeAttribute("aria-busy");
      root.dataset.ready = "true";
    }
  }

  function draw() {
    if (!state.items.length) {
      replace(list, emptyState(t("pol.empty"), createBtn ? h("button", { class: "btn", type: "button", onclick: () => policyDialog(null) }, icon("plus"), t("pol.new")) : null));
      return;
    }
    const items = [...state.items].sort((a, b) => String(a.name).localeCompare(String(b.name)));
    replace(
      list,
      dataTable({
        caption: t("pol.caption"),
        columns: [
          t("common.name"),
          t("pol.col.applies"),
          t("pol.col.tools"),
          t("pol.col.when"),
          t("pol.col.effect"),
          t("pol.col.ttl"),
          t("pol.col.version"),
          t("common.updated"),
          admin ? t("common.actions") : null,
        ],
        rows: items.map(row),
        attrs: { class: "pol-table" },
      }),
    );
    if (highlight) list.querySelector(`tr[data-id="${CSS.escape(highlight)}"]`)?.scrollIntoView({ block: "center" });
  }

  function row(p) {
    const when = predicateText(p.when);
    return h(
      "tr",
      { class: p.id === highlight ? "pol-highlight" : null, dataset: { testid: "policy-row", id: p.id, name: p.name } },
      h("th", { scope: "row", class: "pol-name" }, p.name),
      h("td", { dataset: { testid: "policy-applies" } }, appliesText(p)),
      h("td", { dataset: { testid: "policy-tools" } }, h("div", { class: "pol-chips" }, (p.tools || []).map((x) => h("code", {}, x)))),
      h("td", { dataset: { testid: "policy-when" } }, when ? h("code", { class: "pol-when" }, when) : h("span", { class: "muted" }, t("pol.when_always"))),
      h("td", {}, effectBadge(p.effect)),
      h("td", {}, p.effect === "deny" ? h("span", { class: "muted" }, "—") : fmtTtl(p.approval_ttl_secs ?? DEFAULT_TTL)),
      h("td", { dataset: { testid: "policy-version" } }, p.version ?? "—"),
      h("td", {}, fmtDate(p.updated_at || p.created_at)),
      admin
        ? h(
            "td",
            { class: "pol-actions" },
            h(
              "button",
              { class: "btn btn-small", type: "button", onclick: () => policyDialog(p) },
              icon("edit"),
              t("common.edit"),
              h("span", { class: "sr-only" }, ` ${p.name}`),
            ),
            h(
              "button",
              { class: "btn btn-small btn-danger", type: "button", onclick: () => remove(p) },
              icon("trash"),
              t("common.delete"),
              h("span", { class: "sr-only" }, ` ${p.name}`),
            ),
          )
        : null,
    );
  }

  async function remove(p) {
    const ok = await confirmDialog(t("pol.delete_confirm", { name: p.name }), { danger: true, confirmLabel: t("common.delete") });
    if (!ok) return;
    try {
      await api("DELETE", `${BASE}/${encodeURIComponent(p.id)}`, { signal });
      toast(t("pol.deleted", { name: p.name }), "success");
      announce(t("pol.deleted", { name: p.name }));
      await load();
    } catch (e) {
      if (!isAbort(e)) toast(e.message, "error");
    }
  }

  // ---- Create / edit
  function policyDialog(p) {
    const editing = !!p;
    const d = openDialog({ title: editing ? t("pol.edit_title", { name: p.name }) : t("pol.new_title"), wide: true });
    const leave = () => d.close();
    signal.addEventListener("abort", leave, { once: true });
    d.dialog.addEventListener("close", () => signal.removeEventListener("abort", leave), { once: true });

    const field = (label, control, hint, extra) => {
      control.id ||= uid("pol");
      const hintEl = hint ? h("span", { class: "hint", id: `${control.id}-hint` }, hint) : null;
      if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
      return h("div", { class: "field", ...(extra || {}) }, h("label", { for: control.id }, label), control, hintEl);
    };
    const radios = (legend, name, values, labelOf, checked) => {
      const inputs = {};
      const set = h(
        "fieldset",
        { class: "pol-seg" },
        h("legend", {}, legend),
        h(
          "div",
          { class: "pol-seg-items" },
          values.map((v) => {
            const id = uid("pol-r");
            inputs[v] = h("input", { type: "radio", name, id, value: v, checked: v === checked });
            return h("div", { class: "pol-seg-item" }, inputs[v], h("label", { for: id }, labelOf(v)));
          }),
        ),
      );
      return { set, value: () => values.find((v) => inputs[v].checked), inputs };
    };

    const [kind0, target0] = editing ? targetOf(p) : ["space", ""];
    const name = h("input", { type: "text", name: "name", autocomplete: "off", maxlength: "100", required: true, value: editing ? p.name : "" });
    const applies = radios(t("pol.applies"), uid("applies"), TARGETS, (v) => t(`pol.applies.${v}`), kind0);
    const endpointList = uid("pol-endpoints");
    const target = h("input", { type: "text", name: "target", autocomplete: "off", spellcheck: "false", value: target0 });
    const targetLabel = h("label", { for: (target.id = uid("pol")) });
    const targetHint = h("span", { class: "hint", id: `${target.id}-hint` });
    target.setAttribute("aria-describedby", targetHint.id);
    const targetField = h("div", { class: "field" }, targetLabel, target, targetHint, h("datalist", { id: endpointList }));
    const tools = h("textarea", { name: "tools", rows: "3", spellcheck: "false", class: "pol-mono", placeholder: "filesystem.*\ngit.git_push" });
    tools.value = editing ? (p.tools || []).join("\n") : "";
    const effect = radios(t("pol.effect"), uid("effect"), EFFECTS, (v) => t(`pol.effect.${v}`), editing ? p.effect : "require_approval");
    const ttl = h("input", { type: "number", name: "approval_ttl_secs", min: "1", max: String(MAX_TTL), step: "1", inputmode: "numeric", value: String(editing ? p.approval_ttl_secs ?? DEFAULT_TTL : DEFAULT_TTL) });
    const ttlField = field(t("pol.ttl"), ttl, t("pol.ttl_hint"));
    const when = h("textarea", { name: "when", rows: "6", spellcheck: "false", class: "pol-mono", placeholder: WHEN_EXAMPLE });
    when.value = editing && p.when !== null && p.when !== undefined ? JSON.stringify(p.when, null, 2) : "";
    const error = h("p", { class: "form-error pol-error", role: "alert", dataset: { testid: "policy-error" } });
    const formId = uid("pol-form");
    const submit = h("button", { class: "btn btn-primary", type: "submit", form: formId }, editing ? t("common.save") : t("common.create"));

    const sync = () => {
      const kind = applies.value();
      targetField.hidden = kind === "space";
      target.required = kind !== "space";
      targetLabel.textContent = kind === "token" ? t("pol.target.token") : t("pol.target.endpoint");
      targetHint.textContent = kind === "token" ? t("pol.target.token_hint") : t("pol.target.endpoint_hint");
      if (kind === "endpoint") target.setAttribute("list", endpointList);
      else target.removeAttribute("list");
      ttlField.hidden = effect.value() === "deny";
    };
    applies.set.addEventListener("change", sync);
    effect.set.addEventListener("change", sync);

    const form = h(
      "form",
      { id: formId, class: "pol-form", novalidate: true, dataset: { testid: "policy-form" } },
      field(t("common.name"), name, t("pol.name_hint")),
      applies.set,
      targetField,
      field(t("pol.tools"), tools, t("pol.tools_hint")),
      effect.set,
      ttlField,
      field(t("pol.when"), when, t("pol.when_hint", { example: WHEN_EXAMPLE })),
      error,
    );
    d.body.append(form);
    d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), submit);
    sync();
    name.focus();

    // Named endpoints to pick from (a suggestion list; any name or id may be typed).
    api("GET", "/api/v1/endpoints", { signal })
      .then((body) => {
        const dl = targetField.querySelector("datalist");
        for (const e of itemsOf(body)) if (e && e.name) dl.append(h("option", { value: e.name }));
      })
      .catch(() => {});

    const controls = { name, applies_to: target, endpoint: target, token: target, tools, effect: effect.inputs[EFFECTS[0]], approval_ttl_secs: ttl, when };
    const fail = (message, control) => {
      error.textContent = message;
      for (const c of [name, target, tools, ttl, when]) c.removeAttribute("aria-invalid");
      if (control) {
        control.setAttribute("aria-invalid", "true");
        control.focus();
      }
      if (message) error.scrollIntoView({ block: "nearest" });
    };

    /** The request body from the form; null (the error shown) when it cannot be sent. */
    function body() {
      const b = {};
      b.name = name.value.trim();
      if (!b.name) return fail(t("pol.need_name"), name), null;
      const kind = applies.value();
      if (kind === "space") b.applies_to = { space: true };
      else {
        const id = target.value.trim();
        if (!id) return fail(kind === "token" ? t("pol.need_token") : t("pol.need_endpoint"), target), null;
        b.applies_to = { [kind]: id };
      }
      b.tools = tools.value.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);
      if (!b.tools.length) return fail(t("pol.need_tools"), tools), null;
      b.effect = effect.value();
      if (b.effect === "require_approval") {
        const n = Number(ttl.value);
        if (!Number.isInteger(n) || n < 1 || n > MAX_TTL) return fail(t("pol.bad_ttl", { max: MAX_TTL }), ttl), null;
        b.approval_ttl_secs = n;
      }
      const raw = when.value.trim();
      if (!raw) b.when = null;
      else {
        let parsed;
        try {
          parsed = JSON.parse(raw);
        } catch (e) {
          return fail(t("pol.bad_json", { reason: e.message }), when), null;
        }
        if (parsed !== null && (typeof parsed !== "object" || Array.isArray(parsed))) return fail(t("pol.when_object"), when), null;
        b.when = parsed;
      }
      return b;
    }

    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const b = body();
      if (!b) return;
      fail("");
      submit.disabled = true;
      form.setAttribute("aria-busy", "true");
      try {
        const saved = unwrap(
          editing
            ? await api("PATCH", `${BASE}/${encodeURIComponent(p.id)}`, { body: b, signal })
            : await api("POST", BASE, { body: b, signal }),
        );
        d.close();
        const msg = editing ? t("pol.saved", { name: saved?.name || b.name, version: saved?.version ?? "" }) : t("pol.created", { name: saved?.name || b.name });
        toast(msg, "success");
        announce(msg);
        await load();
      } catch (err) {
        if (isAbort(err)) return;
        // The server names the field it refuses ("when: unknown operator …"): mark that one.
        const detail = err.message || "";
        const lead = /^([a-z_]+)[.:[]/.exec(detail)?.[1];
        const key = FIELDS.includes(lead) ? lead : FIELDS.find((f) => new RegExp(`(^|[^a-z_])${f}([^a-z_]|$)`).test(detail));
        fail(detail, key ? controls[key] : null);
      } finally {
        submit.disabled = false;
        form.removeAttribute("aria-busy");
      }
    });
    return d;
  }

  await load();
}
