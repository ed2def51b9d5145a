// `#/approvals`: the inbox of tool calls a policy held for a person's approval (issue 45).
//
// Routes: `GET /api/v1/approvals?status=&limit=` (newest first: a space admin sees the
// space's requests, anyone else their own), `GET /api/v1/approvals/{id}` and
// `POST /api/v1/approvals/{id}/decision {"decision": "approve"|"deny", "reason"}` (409 when
// the request is no longer pending, 403 when the caller may not decide it).
//
// - Filter tabs by status (pending first); each row: the tool, a preview of its arguments,
//   who asked, the status, its age and the time left before it expires.
// - A drawer with the exact arguments (as JSON), their digest, the policies that held the
//   call and, for the space's admins, Approve and Deny (with an optional reason). The row and
//   the drawer are drawn again from the server's answer; a 409 says so in the API's words
//   and reloads.
// - The list is read again every 5 s while the page is open, and the nav badge (app.js)
//   follows the pending count.
//
// Also exports what policies.js shares: who may decide and change policies, the envelope
// unwrapping, times.

import {
  t,
  h,
  icon,
  replace,
  announce,
  toast,
  api,
  app,
  openDialog,
  copyButton,
  fmtDate,
  pageHeader,
  emptyState,
  errorBlock,
  dataTable,
  setNavCount,
} from "./app.js";

const BASE = "/api/v1/approvals";
const STATUSES = ["pending", "approved", "denied", "used", "expired", "all"];
const LIMIT = 100;
const POLL_MS = 5000;
/** How the server shows a value under a secret-looking name (quarry-policy's `shown`:
 * `[hidden: 12 chars]`; `[redacted]` elsewhere), and a string it cut (`… [N more chars]`). */
const HIDDEN_RE = /\[hidden: \d+ chars\]|\[redacted\]/;
const CUT_RE = /… \[\d+ more chars\]"/;
const BADGES = { pending: "badge-warn", approved: "badge-ok", denied: "badge-danger", used: "badge-info", expired: "" };

// ---------------------------------------------------------------------------------------
// Shared helpers (also used by policies.js)

/** Whether the session may decide approvals and change policies: the machine's owner (or
 * local mode), or an owner or admin of the space the page acts in; never a read-only token.
 * The server decides in the end; this only hides controls it would refuse. */
export function isSpaceAdmin(session) {
  if (!session || session.read_only) return false;
  if (session.machine_owner === true || !session.user) return true;
  const here = (session.spaces || []).find((s) => s.id === app.space) || session.space || {};
  return here.role === "owner" || here.role === "admin";
}

/** The `data` of a `{"data": …}` envelope that app.js's api() passed through whole
 * (it unwraps `{"success", "data"}` only). */
export function unwrap(body) {
  if (body && typeof body === "object" && !Array.isArray(body) && "data" in body && !("id" in body) && !("items" in body)) {
    return body.data;
  }
  return body;
}

/** The `items` of a list answer (`{"items": […]}` or a bare array). */
export function itemsOf(body) {
  const d = unwrap(body);
  if (Array.isArray(d)) return d;
  return Array.isArray(d?.items) ? d.items : [];
}

/** Unix milliseconds from an ISO 8601 string or Unix seconds/milliseconds; null when none. */
export function toMillis(v) {
  if (v === null || v === undefined || v === "") return null;
  if (typeof v === "number") return v < 1e12 ? v * 1000 : v;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? null : ms;
}

/** "3 minutes ago", "in 57 minutes": `ms` relative to `now`, in the page's language. */
export function relative(ms, now = Date.now()) {
  const diff = ms - now;
  const abs = Math.abs(diff);
  const rtf = new Intl.RelativeTimeFormat(app.lang, { numeric: "auto" });
  if (abs < 45_000) return rtf.format(Math.round(diff / 1000), "second");
  if (abs < 45 * 60_000) return rtf.format(Math.round(diff / 60_000), "minute");
  if (abs < 22 * 3_600_000) return rtf.format(Math.round(diff / 3_600_000), "hour");
  return rtf.format(Math.round(diff / 86_400_000), "day");
}

/** A <time> with `text`, its machine-readable moment and the full date as a tooltip. */
function timeEl(ms, text, attrs) {
  if (ms === null) return h("span", attrs || {}, "—");
  return h("time", { datetime: new Date(ms).toISOString(), title: fmtDate(ms), ...(attrs || {}) }, text);
}

function isAbort(e) {
  return e && (e.name === "AbortError" || e.code === "aborted");
}

export function statusBadge(status) {
  const known = status in BADGES;
  return h(
    "span",
    { class: `badge ${BADGES[status] || ""}`.trim(), dataset: { testid: "approval-status", status } },
    known ? t(`ap.status.${status}`) : String(status),
  );
}

function requesterName(a) {
  const r = a.requested_by || {};
  return r.user || (r.user_id ? r.user_id : t("ap.local_owner"));
}

/** The arguments on one line, cut to `max` characters, for the list. */
function preview(args, max = 90) {
  let s;
  try {
    s = JSON.stringify(args ?? {});
  } catch {
    s = String(args);
  }
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** Time left before `a` expires, for pending and approved requests. */
function expiryText(a, now) {
  const ms = toMillis(a.expires_at);
  if (ms === null || !["pending", "approved"].includes(a.status)) return null;
  return ms <= now ? t("ap.expired_now") : relative(ms, now);
}

// ---------------------------------------------------------------------------------------
// Page

export async function render({ root, params, query, signal, session }) {
  const admin = isSpaceAdmin(session);
  const initial = STATUSES.includes(query.get("status")) ? query.get("status") : "pending";
  const state = {
    status: initial,
    items: [],
    /** Requests decided on this page: shown with their new status until the filter changes. */
    decided: new Map(),
    signature: "",
    loading: false,
    drawer: null, // {id, fill(approval)}
    loaded: false,
  };

  // ---- Layout
  const refreshBtn = h(
    "button",
    { class: "btn", type: "button", onclick: () => load({ announceIt: true }) },
    icon("refresh"),
    t("common.refresh"),
  );
  const policiesLink = h("a", { class: "btn", href: "#/policies" }, t("ap.policies_link"));
  const intro = h(
    "div",
    { class: "ap-intro" },
    h("p", { class: "muted" }, t("ap.intro")),
    h("p", { class: "muted", dataset: { testid: "approvals-role-hint" } }, admin ? t("ap.admin_hint") : t("ap.own_hint")),
  );
  const tabButtons = new Map();
  const tablist = h("div", { class: "tabs ap-tabs", role: "tablist", "aria-label": t("ap.filter") });
  STATUSES.forEach((s, i) => {
    const btn = h(
      "button",
      {
        class: "tab",
        role: "tab",
        type: "button",
        id: `ap-tab-${s}`,
        "aria-controls": "ap-panel",
        "aria-selected": s === state.status ? "true" : "false",
        tabindex: s === state.status ? "0" : "-1",
        dataset: { status: s },
        onclick: () => selectStatus(s),
        onkeydown: (e) => {
          const n = STATUSES.length;
          const next = e.key === "ArrowRight" ? (i + 1) % n : e.key === "ArrowLeft" ? (i - 1 + n) % n : -1;
          if (next >= 0) {
            e.preventDefault();
            selectStatus(STATUSES[next], true);
          }
        },
      },
      t(`ap.tab.${s}`),
    );
    tabButtons.set(s, btn);
    tablist.append(btn);
  });
  const panel = h("div", {
    class: "ap-panel",
    role: "tabpanel",
    id: "ap-panel",
    tabindex: "0",
    "aria-labelledby": `ap-tab-${state.status}`,
    "aria-busy": "true",
    dataset: { testid: "approvals-list" },
  });
  replace(root, pageHeader(t("ap.title"), policiesLink, refreshBtn), intro, tablist, panel);
  panel.append(h("p", { class: "loading" }, t("common.loading")));

  function selectStatus(s, focus = false) {
    if (s === state.status && state.loaded) {
      if (focus) tabButtons.get(s).focus();
      return;
    }
    state.status = s;
    state.decided.clear();
    state.signature = "";
    for (const [k, btn] of tabButtons) {
      const on = k === s;
      btn.setAttribute("aria-selected", on ? "true" : "false");
      btn.tabIndex = on ? 0 : -1;
    }
    if (focus) tabButtons.get(s).focus();
    panel.setAttribute("aria-labelledby", `ap-tab-${s}`);
    // Kept in the address (a reload stays on the filter) without re-rendering the page.
    history.replaceState(null, "", s === "pending" ? "#/approvals" : `#/approvals?status=${s}`);
    load();
  }

  // ---- Loading and polling
  async function load({ quiet = false, announceIt = false } = {}) {
    if (state.loading) return;
    state.loading = true;
    const status = state.status;
    if (!quiet) panel.setAttribute("aria-busy", "true");
    try {
      const body = await api("GET", BASE, { query: { status: status === "all" ? undefined : status, limit: LIMIT }, signal });
      if (signal.aborted || status !== state.status) return;
      state.items = itemsOf(body);
      state.loaded = true;
      if (status === "pending") {
        const n = state.items.filter((a) => a.status === "pending").length;
        setNavCount("approvals", n);
        tabButtons.get("pending").textContent = n ? t("ap.tab.pending_n", { n }) : t("ap.tab.pending");
      }
      draw();
      if (announceIt) announce(t("ap.loaded", { n: state.items.length }));
      // A drawer open on a request that changed elsewhere (decided by another admin, used).
      if (state.drawer) {
        const fresh = state.items.find((a) => a.id === state.drawer.id);
        const now = state.drawer.current();
        if (fresh) {
          const next = newer(now, fresh);
          if (JSON.stringify(next) !== JSON.stringify(now)) state.drawer.fill(next);
        }
      }
    } catch (e) {
      if (signal.aborted || isAbort(e)) return;
      if (!quiet || !state.loaded) {
        state.signature = "";
        replace(panel, errorBlock(e, () => load()));
      }
    } finally {
      state.loading = false;
      panel.removeAttribute("aria-busy");
      root.dataset.ready = "true";
    }
  }

  const timer = setInterval(() => {
    if (!document.hidden) load({ quiet: true });
  }, POLL_MS);
  signal.addEventListener("abort", () => clearInterval(timer), { once: true });

  // ---- The list
  function shown() {
    const list = [...state.items];
    for (const [id, a] of state.decided) {
      const i = list.findIndex((x) => x.id === id);
      if (i >= 0) list[i] = newer(list[i], a);
      else list.push(a);
    }
    return list.sort((a, b) => (toMillis(b.created_at) || 0) - (toMillis(a.created_at) || 0));
  }

  function draw() {
    const list = shown();
    const signature = JSON.stringify(list);
    if (signature === state.signature) {
      updateTimes();
      return;
    }
    state.signature = signature;
    const focusKey = document.activeElement?.dataset?.focusKey;
    if (!list.length) {
      replace(panel, emptyState(state.status === "pending" ? t("ap.empty_pending") : t("ap.empty", { status: t(`ap.tab.${state.status}`) })));
      return;
    }
    const now = Date.now();
    const rows = list.map((a) => row(a, now));
    replace(
      panel,
      dataTable({
        caption: t("ap.caption", { status: t(`ap.tab.${state.status}`) }),
        columns: [t("ap.col.tool"), t("ap.col.requester"), t("common.status"), t("ap.col.age"), t("ap.col.expires"), t("common.actions")],
        rows,
        attrs: { class: "ap-table" },
      }),
    );
    if (focusKey) panel.querySelector(`[data-focus-key="${CSS.escape(focusKey)}"]`)?.focus();
  }

  function row(a, now) {
    const created = toMillis(a.created_at);
    const expires = toMillis(a.expires_at);
    const left = expiryText(a, now);
    return h(
      "tr",
      { dataset: { testid: "approval-row", id: a.id, status: a.status } },
      h(
        "td",
        { class: "ap-tool" },
        h("code", { dataset: { testid: "approval-tool" } }, a.tool),
        h("span", { class: "ap-preview", dataset: { testid: "approval-preview" } }, preview(a.arguments)),
      ),
      h("td", { dataset: { testid: "approval-requester" } }, requesterName(a)),
      h("td", {}, statusBadge(a.status)),
      h("td", {}, timeEl(created, created === null ? "—" : relative(created, now), { dataset: { rel: "age" } })),
      h("td", {}, left === null ? h("span", { class: "muted" }, "—") : timeEl(expires, left, { dataset: { rel: "expiry" } })),
      h(
        "td",
        {},
        h(
          "button",
          {
            class: "btn btn-small",
            type: "button",
            dataset: { focusKey: `review-${a.id}`, testid: "approval-review" },
            onclick: () => openDrawer(a),
          },
          a.status === "pending" && admin ? t("ap.review") : t("ap.details"),
          h("span", { class: "sr-only" }, ` ${t("ap.review_of", { tool: a.tool, user: requesterName(a) })}`),
        ),
      ),
    );
  }

  /** Ages and expiries move on between polls: their texts follow without a redraw. */
  function updateTimes() {
    const now = Date.now();
    const list = shown();
    for (const tr of panel.querySelectorAll("tr[data-id]")) {
      const a = list.find((x) => x.id === tr.dataset.id);
      if (!a) continue;
      const age = tr.querySelector('time[data-rel="age"]');
      const created = toMillis(a.created_at);
      if (age && created !== null) age.textContent = relative(created, now);
      const exp = tr.querySelector('time[data-rel="expiry"]');
      const left = expiryText(a, now);
      if (exp && left !== null) exp.textContent = left;
    }
  }

  /** Records the server's answer for `a` (a decision, a fresh read) and redraws the row. */
  function remember(a) {
    state.decided.set(a.id, a);
    const i = state.items.findIndex((x) => x.id === a.id);
    if (i >= 0) state.items[i] = a;
    draw();
  }

  // ---- The drawer
  function openDrawer(a) {
    if (state.drawer) state.drawer.close();
    const d = openDialog({ title: a.tool, variant: "drawer", onClose: () => (state.drawer = null) });
    d.dialog.dataset.testid = "approval-drawer";
    const abortClose = () => d.close();
    signal.addEventListener("abort", abortClose, { once: true });
    d.dialog.addEventListener("close", () => signal.removeEventListener("abort", abortClose), { once: true });

    const content = h("div", { class: "ap-detail" });
    const error = h("p", { class: "form-error ap-error", role: "alert", dataset: { testid: "approval-error" } });
    const reason = h("textarea", { id: "ap-deny-reason", name: "reason", rows: "3", maxlength: "2000" });
    const denyConfirm = h("button", { class: "btn btn-danger", type: "submit" }, t("ap.deny_confirm"));
    const denyForm = h(
      "form",
      { class: "ap-deny card", hidden: true, "aria-labelledby": "ap-deny-title", dataset: { testid: "deny-form" } },
      h("h3", { id: "ap-deny-title" }, t("ap.deny_title")),
      h("div", { class: "field" }, h("label", { for: reason.id }, t("ap.reason")), reason, h("span", { class: "hint", id: "ap-deny-hint" }, t("ap.reason_hint"))),
      h(
        "div",
        { class: "row" },
        denyConfirm,
        h("button", { class: "btn", type: "button", onclick: () => toggleDeny(false) }, t("common.cancel")),
      ),
    );
    reason.setAttribute("aria-describedby", "ap-deny-hint");
    const approveBtn = h("button", { class: "btn btn-primary", type: "button", onclick: () => decide("approve") }, t("ap.approve"));
    const denyBtn = h(
      "button",
      { class: "btn btn-danger", type: "button", "aria-expanded": "false", "aria-controls": "ap-deny-form", onclick: () => toggleDeny(denyForm.hidden) },
      t("ap.deny"),
    );
    denyForm.id = "ap-deny-form";
    d.body.append(content, denyForm, error);

    let current = a;
    const buttons = [approveBtn, denyBtn, denyConfirm];

    function toggleDeny(open) {
      denyForm.hidden = !open;
      denyBtn.setAttribute("aria-expanded", open ? "true" : "false");
      if (open) reason.focus();
      else denyBtn.focus();
    }

    function fill(x) {
      current = x;
      const now = Date.now();
      const created = toMillis(x.created_at);
      const expires = toMillis(x.expires_at);
      const by = x.requested_by || {};
      // The server says whether this viewer may decide (`can_decide`: an admin, and not the
      // requesting token's own chain); older answers without it fall back to the token check.
      const own = typeof x.can_decide === "boolean"
        ? admin && x.status === "pending" && !x.can_decide
        : !!(session?.token_id && by.token_id && by.token_id === session.token_id);
      const pending = x.status === "pending";
      const fact = (label, value, testid) =>
        h("div", { class: "ap-fact" }, h("dt", {}, label), h("dd", { dataset: testid ? { testid } : {} }, value ?? "—"));
      let args;
      try {
        args = JSON.stringify(x.arguments ?? {}, null, 2);
      } catch {
        args = String(x.arguments);
      }
      const left = expiryText(x, now);
      replace(
        content,
        h(
          "p",
          { class: "ap-summary" },
          statusBadge(x.status),
          " ",
          t("ap.asked", { user: requesterName(x), when: created === null ? "—" : relative(created, now) }),
        ),
        h(
          "dl",
          { class: "ap-facts" },
          fact(t("ap.col.requester"), [requesterName(x), by.token_id ? h("span", { class: "muted" }, ` · ${t("ap.token", { id: by.token_id })}`) : null], "approval-requested-by"),
          fact(t("ap.endpoint"), x.endpoint || t("ap.no_endpoint")),
          fact(t("ap.requested_at"), timeEl(created, fmtDate(created))),
          fact(t("ap.expires_at"), expires === null ? "—" : [timeEl(expires, fmtDate(expires)), left ? ` (${left})` : null]),
          x.decided_by || x.decided_at ? fact(t("ap.decided_by"), x.decided_by || "—", "approval-decided-by") : null,
          x.decided_at ? fact(t("ap.decided_at"), timeEl(toMillis(x.decided_at), fmtDate(x.decided_at))) : null,
          x.reason ? fact(t("ap.reason_label"), x.reason, "approval-reason") : null,
          x.used_at ? fact(t("ap.used_at"), timeEl(toMillis(x.used_at), fmtDate(x.used_at))) : null,
        ),
        h(
          "section",
          { class: "ap-section", "aria-labelledby": "ap-args-title" },
          h("div", { class: "ap-section-head" }, h("h3", { id: "ap-args-title" }, t("ap.arguments")), copyButton(() => args, t("ap.copy_arguments"))),
          h("pre", { class: "ap-args", tabindex: "0", dataset: { testid: "approval-arguments" } }, args),
          HIDDEN_RE.test(args) ? h("p", { class: "hint", dataset: { testid: "approval-hidden-hint" } }, t("ap.redacted_hint")) : null,
          CUT_RE.test(args) ? h("p", { class: "hint" }, t("ap.cut_hint")) : null,
        ),
        h(
          "section",
          { class: "ap-section", "aria-labelledby": "ap-digest-title" },
          h("h3", { id: "ap-digest-title" }, t("ap.digest")),
          h("p", {}, h("code", { class: "ap-digest", dataset: { testid: "approval-digest" } }, x.args_digest || "—")),
          h("p", { class: "hint" }, t("ap.digest_hint")),
        ),
        h(
          "section",
          { class: "ap-section", "aria-labelledby": "ap-policies-title" },
          h("h3", { id: "ap-policies-title" }, t("ap.held_by")),
          (x.policies || []).length
            ? h(
                "ul",
                { class: "ap-policies", dataset: { testid: "approval-policies" } },
                x.policies.map((p) =>
                  h(
                    "li",
                    {},
                    h("a", { href: `#/policies?id=${encodeURIComponent(p.id)}` }, p.name || p.id),
                    p.version !== undefined && p.version !== null ? h("span", { class: "muted" }, ` · ${t("ap.version", { n: p.version })}`) : null,
                  ),
                ),
              )
            : h("p", { class: "muted" }, t("common.none")),
        ),
        pending && !admin ? h("p", { class: "hint", dataset: { testid: "approval-no-decide" } }, t("ap.not_admin")) : null,
        pending && admin && own ? h("p", { class: "hint", dataset: { testid: "approval-no-decide" } }, t("ap.own_request")) : null,
      );
      const canAct = pending && admin && !own;
      replace(d.footer, canAct ? [denyBtn, approveBtn] : h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.close")));
      if (!canAct) {
        denyForm.hidden = true;
        denyBtn.setAttribute("aria-expanded", "false");
      }
    }

    async function decide(decision) {
      error.textContent = "";
      const body = { decision };
      const why = reason.value.trim();
      if (decision === "deny" && why) body.reason = why;
      for (const b of buttons) b.disabled = true;
      d.dialog.setAttribute("aria-busy", "true");
      try {
        const answer = unwrap(await api("POST", `${BASE}/${encodeURIComponent(current.id)}/decision`, { body, signal }));
        const next = answer && typeof answer === "object" && answer.id ? answer : { ...current, status: decision === "approve" ? "approved" : "denied" };
        remember(next);
        fill(next);
        reason.value = "";
        const msg = decision === "approve" ? t("ap.approved", { tool: next.tool }) : t("ap.denied", { tool: next.tool });
        toast(msg, "success");
        announce(msg);
        if (state.status !== "pending") load({ quiet: true });
        refreshBadge();
        d.footer.querySelector("button")?.focus();
      } catch (e) {
        if (signal.aborted || isAbort(e)) return;
        if (e.status === 409) {
          error.textContent = t("ap.conflict", { detail: e.message });
          try {
            const fresh = unwrap(await api("GET", `${BASE}/${encodeURIComponent(current.id)}`, { signal }));
            if (fresh && fresh.id) {
              remember(fresh);
              fill(fresh);
            }
          } catch (e2) {
            if (isAbort(e2)) return;
          }
          load({ quiet: true });
          refreshBadge();
        } else {
          error.textContent = e.status === 403 ? t("ap.forbidden", { detail: e.message }) : e.message;
        }
      } finally {
        for (const b of buttons) b.disabled = false;
        d.dialog.removeAttribute("aria-busy");
      }
    }

    denyForm.addEventListener("submit", (e) => {
      e.preventDefault();
      decide("deny");
    });

    fill(a);
    state.drawer = { id: a.id, fill, close: () => d.close(), current: () => current };
    d.footer.querySelector("button")?.focus();
    return d;
  }

  /** The pending count for the nav badge, read now (after a decision on another filter). */
  async function refreshBadge() {
    if (state.status === "pending") return;
    try {
      const body = await api("GET", BASE, { query: { status: "pending", limit: LIMIT }, signal });
      setNavCount("approvals", itemsOf(body).filter((x) => x.status === "pending").length);
    } catch {
      /* the badge's own poll tries again */
    }
  }

  await load();
  // `#/approvals/<id>`: that request's drawer (a link from a notification or the CLI).
  if (params[0] && !signal.aborted) {
    const id = params[0];
    let a = state.items.find((x) => x.id === id);
    if (!a) {
      try {
        a = unwrap(await api("GET", `${BASE}/${encodeURIComponent(id)}`, { signal }));
      } catch (e) {
        if (!isAbort(e)) toast(e.message, "error");
        a = null;
      }
    }
    if (a && a.id && !signal.aborted) openDrawer(a);
  }
}

/** The later of two readings of one request: a decision this page made may be newer than a
 * list read before it. */
function newer(a, b) {
  const at = (x) => Math.max(toMillis(x.used_at) || 0, toMillis(x.decided_at) || 0);
  if (a.status !== "pending" && b.status === "pending") return a;
  return at(b) > at(a) ? b : a.status === "pending" && b.status !== "pending" ? b : a;
}
