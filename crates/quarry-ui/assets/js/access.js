// The Access page (#/access): spaces, their members, the caller's access tokens, and (for
// the machine's owner) users. A client of /api/v1/spaces, /api/v1/users and /api/v1/tokens
// (docs/access-api.md); the server decides what is allowed, this page only hides what it
// would refuse and says why. A new token's secret is shown once, in a dialog, and kept
// nowhere else (not in localStorage, not in the page after the dialog closes).

import {
  app,
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
  pageHeader,
  emptyState,
  errorBlock,
  navigate,
  refreshSession,
  dataTable,
  apiHeaders,
} from "./app.js";

const ROLES = ["owner", "admin", "editor", "viewer"];
const RANK = { viewer: 0, editor: 1, admin: 2, owner: 3 };
const EXPIRY_DAYS = ["7", "30", "90"];

/** What the page knows; reloaded piecemeal after changes. */
function newState(session) {
  return {
    session,
    machineOwner: session.machine_owner === true || !session.user,
    readOnly: !!session.read_only,
    // A credential without the management scope changes no member, role or group.
    noManage: session.manage === false,
    spaces: [],
    users: [],
    member: { space: null },
  };
}

function roleLabel(role) {
  return ROLES.includes(role) ? t(`access.role.${role}`) : role;
}

function roleBadge(role) {
  const kind = role === "owner" ? "badge-info" : role === "admin" ? "access-badge-ok" : "";
  return h("span", { class: `badge ${kind}`, dataset: { role } }, roleLabel(role));
}

function section(title, ...children) {
  return h("section", { class: "access-section" }, h("h2", {}, title), children);
}

function hint(text, extra) {
  return h("p", { class: "hint access-hint", ...extra }, text);
}

/** A form field: label + control (+ hint), ids wired. */
function field(id, label, control, help) {
  control.id = id;
  const helpEl = help ? h("span", { class: "hint", id: `${id}-hint` }, help) : null;
  if (helpEl) control.setAttribute("aria-describedby", helpEl.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, helpEl);
}

function spaceName(state, id) {
  const s = state.spaces.find((x) => x.id === id);
  return s ? s.name : id.slice(0, 8);
}

/** Reads the server's error for a form's error line. */
function showError(el, err) {
  el.textContent = err?.message || String(err);
  announce(el.textContent, { assertive: true });
}

export async function render({ root, query, signal, session }) {
  const state = newState(session);
  const loadSpaces = async () => {
    state.spaces = await api("GET", "/api/v1/spaces", { signal });
  };
  const loadUsers = async () => {
    state.users = state.machineOwner ? await api("GET", "/api/v1/users", { signal }) : [];
  };

  replace(root, h("p", { class: "loading" }, t("common.loading")));
  try {
    await Promise.all([loadSpaces(), loadUsers()]);
  } catch (e) {
    if (signal.aborted) return;
    replace(root, pageHeader(t("access.title")), errorBlock(e, () => navigate(location.hash)));
    root.dataset.ready = "true";
    return;
  }
  if (signal.aborted) return;

  const visible = state.spaces.map((s) => s.id);
  state.member.space = visible.includes(query.get("space"))
    ? query.get("space")
    : visible.includes(app.space)
      ? app.space
      : visible[0] || null;

  const who = state.machineOwner
    ? t("access.who_owner")
    : t("access.who_user", { user: session.user?.name || "" });
  const intro = h(
    "div",
    { class: "access-intro" },
    h("p", { class: "muted" }, who),
    state.readOnly ? h("p", {}, h("span", { class: "badge badge-warn" }, t("access.read_only_token")), " ", t("access.read_only_help")) : null,
  );

  const items = [
    { id: "spaces", label: t("access.tab.spaces"), render: (p) => spacesPanel(p, state, ctl) },
    { id: "members", label: t("access.tab.members"), render: (p) => membersPanel(p, state, ctl) },
    { id: "groups", label: t("access.tab.groups"), render: (p) => groupsPanel(p, state, ctl) },
    { id: "tokens", label: t("access.tab.tokens"), render: (p) => tokensPanel(p, state, ctl) },
  ];
  if (state.machineOwner) items.push({ id: "users", label: t("access.tab.users"), render: (p) => usersPanel(p, state, ctl) });
  // The audit log is for the space's admins and owners (the server refuses others).
  if (state.machineOwner || ["owner", "admin"].includes(session.role)) {
    items.push({ id: "audit", label: t("access.tab.audit"), render: (p) => auditPanel(p, ctl) });
  }

  // Re-rendering a panel: it renders again the next time it is shown (or now if shown).
  const panels = {};
  const ctl = {
    signal,
    loadSpaces,
    loadUsers,
    rerender(id) {
      const p = panels[id];
      if (!p) return;
      const item = items.find((i) => i.id === id);
      if (p.hidden) delete p.dataset.rendered;
      else item.render(p);
    },
    show(id) {
      view.select(id, true);
    },
    /** The session changed (a space created or deleted): refresh it, keep the chrome in step. */
    async refreshSession() {
      if (app.space && !state.spaces.some((s) => s.id === app.space) && state.machineOwner) {
        app.space = null;
        localStorage.removeItem("quarry.space");
      }
      try {
        await refreshSession();
      } catch {
        /* the page still works; the top bar catches up on the next navigation */
      }
    },
  };
  const wrapped = items.map((i) => ({
    ...i,
    render: (p) => {
      panels[i.id] = p;
      return i.render(p);
    },
  }));
  const view = tabs(wrapped, {
    label: t("access.title"),
    onChange: (id) => {
      const q = new URLSearchParams({ tab: id });
      history.replaceState(null, "", `#/access?${q}`);
    },
  });
  replace(root, pageHeader(t("access.title")), intro, view.el);
  const wanted = query.get("tab");
  if (wanted && items.some((i) => i.id === wanted)) view.select(wanted);
  root.dataset.ready = "true";
}

// ---------------------------------------------------------------------------------------
// Spaces

function spacesPanel(panel, state, ctl) {
  const canCreate = !state.readOnly;
  const createBtn = canCreate
    ? h("button", { class: "btn btn-primary", type: "button", onclick: () => createSpaceDialog(state, ctl) }, icon("plus"), t("access.space.new"))
    : null;
  const rows = state.spaces.map((s) => {
    const canDelete = !state.readOnly && !s.is_default && s.role === "owner";
    return h(
      "tr",
      { dataset: { space: s.name } },
      h(
        "td",
        {},
        h("span", { class: "access-name" }, s.name),
        s.is_default ? [" ", h("span", { class: "badge" }, t("access.space.default"))] : null,
        s.description ? h("div", { class: "muted access-desc" }, s.description) : null,
      ),
      h("td", {}, roleBadge(s.role)),
      h("td", { class: "num" }, String(s.members)),
      h("td", { class: "access-date" }, fmtDate(s.created_at)),
      h(
        "td",
        { class: "access-actions" },
        h(
          "button",
          {
            class: "btn btn-small",
            type: "button",
            "aria-label": t("access.space.members_of", { space: s.name }),
            onclick: () => {
              state.member.space = s.id;
              ctl.rerender("members");
              ctl.show("members");
            },
          },
          t("access.tab.members"),
        ),
        canDelete
          ? h(
              "button",
              {
                class: "btn btn-small btn-danger",
                type: "button",
                "aria-label": t("access.space.delete_named", { space: s.name }),
                onclick: () => deleteSpace(s, state, ctl),
              },
              icon("trash"),
              t("common.delete"),
            )
          : null,
      ),
    );
  });
  const table = state.spaces.length
    ? dataTable({
        attrs: { "data-testid": "spaces-table" },
        caption: t("access.tab.spaces"),
        columns: [t("common.name"), t("access.your_role"), t("access.space.members"), t("common.created"), t("common.actions")],
        rows,
      })
    : emptyState(t("access.space.none"), createBtn);
  replace(
    panel,
    section(
      t("access.tab.spaces"),
      h("div", { class: "access-toolbar" }, createBtn, hint(state.machineOwner ? t("access.space.help_owner") : t("access.space.help_user"))),
      table,
    ),
  );
}

function createSpaceDialog(state, ctl) {
  const d = openDialog({ title: t("access.space.new") });
  const name = h("input", { name: "name", required: true, autocomplete: "off", spellcheck: "false", maxlength: "64" });
  const desc = h("input", { name: "description", autocomplete: "off", maxlength: "1000" });
  const error = h("p", { class: "form-error", role: "alert" });
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, t("common.create"));
  const form = h(
    "form",
    { class: "access-form", novalidate: true },
    field("space-name", t("common.name"), name, t("access.name_rule")),
    field("space-desc", t("common.description"), desc),
    state.machineOwner ? null : hint(t("access.space.token_note")),
    error,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    if (!name.value.trim()) {
      showError(error, { message: t("access.name_required") });
      name.focus();
      return;
    }
    submit.disabled = true;
    try {
      const s = await api("POST", "/api/v1/spaces", { body: { name: name.value.trim(), description: desc.value.trim() } });
      d.close();
      toast(t("access.space.created", { space: s.name }), "success");
      announce(t("access.space.created", { space: s.name }));
      if (s.note) toast(t("access.space.token_note"), "info");
      await ctl.loadSpaces();
      await ctl.refreshSession();
      ctl.rerender("spaces");
      ctl.rerender("members");
      ctl.rerender("groups");
      ctl.rerender("tokens");
    } catch (err) {
      showError(error, err);
      submit.disabled = false;
      name.focus();
    }
  });
  d.body.append(form);
  d.footer.append(
    h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")),
    submit,
  );
  form.id = "space-create-form";
  submit.setAttribute("form", form.id);
  name.focus();
}

async function deleteSpace(s, state, ctl) {
  const ok = await confirmDialog(t("access.space.delete_confirm", { space: s.name }), {
    danger: true,
    confirmLabel: t("access.space.delete"),
  });
  if (!ok) return;
  try {
    await api("DELETE", `/api/v1/spaces/${encodeURIComponent(s.id)}`, { query: { force: "true" } });
    toast(t("access.space.deleted", { space: s.name }), "success");
    announce(t("access.space.deleted", { space: s.name }));
    if (app.space === s.id) {
      app.space = null;
      localStorage.removeItem("quarry.space");
    }
    await ctl.loadSpaces();
    if (state.member.space === s.id) state.member.space = state.spaces[0]?.id || null;
    await ctl.refreshSession();
    if (state.machineOwner) await ctl.loadUsers();
    ctl.rerender("spaces");
    ctl.rerender("members");
    ctl.rerender("groups");
    ctl.rerender("tokens");
    ctl.rerender("users");
  } catch (err) {
    toast(err.message, "error");
    announce(err.message, { assertive: true });
  }
}

// ---------------------------------------------------------------------------------------
// Members

function membersPanel(panel, state, ctl) {
  if (!state.spaces.length) {
    replace(panel, section(t("access.tab.members"), emptyState(t("access.space.none"))));
    return;
  }
  const select = h(
    "select",
    {
      onchange: () => {
        state.member.space = select.value;
        membersPanel(panel, state, ctl);
        panel.querySelector("#members-space")?.focus();
      },
    },
    state.spaces.map((s) => h("option", { value: s.id, selected: s.id === state.member.space }, s.name)),
  );
  const space = state.spaces.find((s) => s.id === state.member.space) || state.spaces[0];
  state.member.space = space.id;
  const myRole = space.role;
  const canManage = !state.readOnly && !state.noManage && RANK[myRole] >= RANK.admin;
  const canOwner = canManage && myRole === "owner";
  const body = h("div", { class: "access-members", "aria-live": "polite", "aria-busy": "true" }, h("p", { class: "loading" }, t("common.loading")));
  const why = state.readOnly
    ? t("access.members.read_only")
    : state.noManage && RANK[myRole] >= RANK.admin
      ? t("access.members.no_manage")
      : !canManage
      ? t("access.members.need_admin", { role: roleLabel(myRole) })
      : !canOwner
        ? t("access.members.admin_note")
        : null;
  replace(
    panel,
    section(
      t("access.tab.members"),
      h("div", { class: "access-toolbar" }, field("members-space", t("access.members.space"), select)),
      why ? hint(why, { "data-testid": "members-why" }) : null,
      canManage ? addMemberForm(space, state, canOwner, () => loadMembers()) : null,
      body,
    ),
  );

  async function loadMembers() {
    body.setAttribute("aria-busy", "true");
    let list;
    try {
      list = await api("GET", `/api/v1/spaces/${encodeURIComponent(space.id)}/members`, { signal: ctl.signal });
    } catch (e) {
      if (ctl.signal.aborted) return;
      replace(body, errorBlock(e, loadMembers));
      body.removeAttribute("aria-busy");
      return;
    }
    space.members = list.length;
    ctl.rerender("groups"); // its member picker offers the space's members
    replace(body, membersTable(list, space, state, canManage, canOwner, loadMembers));
    body.removeAttribute("aria-busy");
  }
  loadMembers();
}

function addMemberForm(space, state, canOwner, reload) {
  const user = h("input", { name: "user", required: true, autocomplete: "off", spellcheck: "false" });
  let datalist = null;
  if (state.users.length) {
    datalist = h("datalist", { id: "access-user-names" }, state.users.map((u) => h("option", { value: u.name })));
    user.setAttribute("list", datalist.id);
  }
  const role = h(
    "select",
    { name: "role" },
    ROLES.filter((r) => canOwner || r !== "owner")
      .slice()
      .reverse()
      .map((r) => h("option", { value: r, selected: r === "viewer" }, roleLabel(r))),
  );
  const error = h("p", { class: "form-error", role: "alert" });
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, icon("plus"), t("access.members.add"));
  const form = h(
    "form",
    { class: "card access-add", "aria-label": t("access.members.add_to", { space: space.name }) },
    h(
      "div",
      { class: "access-add-row" },
      field("member-user", t("access.members.user"), user),
      field("member-role", t("access.members.role"), role),
      h("div", { class: "access-add-submit" }, submit),
    ),
    datalist,
    error,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const name = user.value.trim();
    if (!name) {
      showError(error, { message: t("access.members.user_required") });
      user.focus();
      return;
    }
    submit.disabled = true;
    try {
      await api("PUT", `/api/v1/spaces/${encodeURIComponent(space.id)}/members/${encodeURIComponent(name)}`, {
        body: { role: role.value },
      });
      toast(t("access.members.added", { user: name, role: roleLabel(role.value) }), "success");
      announce(t("access.members.added", { user: name, role: roleLabel(role.value) }));
      user.value = "";
      await reload();
    } catch (err) {
      showError(error, err);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function membersTable(list, space, state, canManage, canOwner, reload) {
  if (!list.length) return emptyState(t("access.members.none"));
  const rows = list.map((m) => {
    const editable = canManage && (m.role !== "owner" || canOwner);
    let roleCell;
    if (editable) {
      const sel = h(
        "select",
        {
          "aria-label": t("access.members.role_of", { user: m.user }),
          dataset: { testid: "member-role" },
        },
        ROLES.filter((r) => canOwner || r !== "owner")
          .slice()
          .reverse()
          .map((r) => h("option", { value: r, selected: r === m.role }, roleLabel(r))),
      );
      sel.addEventListener("change", async () => {
        sel.disabled = true;
        try {
          await api("PUT", `/api/v1/spaces/${encodeURIComponent(space.id)}/members/${encodeURIComponent(m.user)}`, {
            body: { role: sel.value },
          });
          m.role = sel.value;
          toast(t("access.members.changed", { user: m.user, role: roleLabel(sel.value) }), "success");
          announce(t("access.members.changed", { user: m.user, role: roleLabel(sel.value) }));
          await reload();
        } catch (err) {
          sel.value = m.role;
          sel.disabled = false;
          toast(err.message, "error");
          announce(err.message, { assertive: true });
        }
      });
      roleCell = sel;
    } else {
      roleCell = roleBadge(m.role);
    }
    return h(
      "tr",
      { dataset: { member: m.user } },
      h("td", { class: "access-name" }, m.user),
      h("td", {}, roleCell),
      h("td", { class: "access-date" }, fmtDate(m.joined_at)),
      h(
        "td",
        { class: "access-actions" },
        editable
          ? h(
              "button",
              {
                class: "btn btn-small btn-danger",
                type: "button",
                "aria-label": t("access.members.remove_named", { user: m.user }),
                onclick: async () => {
                  const ok = await confirmDialog(t("access.members.remove_confirm", { user: m.user, space: space.name }), {
                    danger: true,
                    confirmLabel: t("access.members.remove"),
                  });
                  if (!ok) return;
                  try {
                    await api("DELETE", `/api/v1/spaces/${encodeURIComponent(space.id)}/members/${encodeURIComponent(m.user)}`);
                    toast(t("access.members.removed", { user: m.user }), "success");
                    announce(t("access.members.removed", { user: m.user }));
                    await reload();
                  } catch (err) {
                    toast(err.message, "error");
                    announce(err.message, { assertive: true });
                  }
                },
              },
              t("access.members.remove"),
            )
          : null,
      ),
    );
  });
  return dataTable({
    attrs: { "data-testid": "members-table" },
    caption: t("access.members.caption", { space: space.name }),
    columns: [t("access.members.user"), t("access.members.role"), t("access.members.joined"), t("common.actions")],
    rows,
  });
}

// ---------------------------------------------------------------------------------------
// Groups (/api/v1/groups, in the chosen space: `?space_id=`; docs/access-api.md "Groups").
// A document's readers name them `group:<name>`; only members of the space join them.

function groupsPanel(panel, state, ctl) {
  if (!state.spaces.length) {
    replace(panel, section(t("access.tab.groups"), emptyState(t("access.space.none"))));
    return;
  }
  const select = h(
    "select",
    {
      onchange: () => {
        state.member.space = select.value;
        ctl.rerender("members");
        groupsPanel(panel, state, ctl);
        panel.querySelector("#groups-space")?.focus();
      },
    },
    state.spaces.map((s) => h("option", { value: s.id, selected: s.id === state.member.space }, s.name)),
  );
  const space = state.spaces.find((s) => s.id === state.member.space) || state.spaces[0];
  state.member.space = space.id;
  const canManage = !state.readOnly && !state.noManage && RANK[space.role] >= RANK.admin;
  const q = { space_id: space.id };
  const why = state.readOnly
    ? t("access.groups.read_only")
    : state.noManage && RANK[space.role] >= RANK.admin
      ? t("access.groups.no_manage")
      : !canManage
      ? t("access.groups.need_admin", { role: roleLabel(space.role) })
      : null;
  const body = h("div", { class: "access-groups", "aria-live": "polite", "aria-busy": "true" }, h("p", { class: "loading" }, t("common.loading")));
  replace(
    panel,
    section(
      t("access.tab.groups"),
      h("div", { class: "access-toolbar" }, field("groups-space", t("access.members.space"), select), hint(t("access.groups.help"))),
      why ? hint(why, { "data-testid": "groups-why" }) : null,
      canManage ? createGroupForm(space, q, () => load()) : null,
      body,
    ),
  );

  async function load(focusSel) {
    body.setAttribute("aria-busy", "true");
    let groups;
    let members = [];
    try {
      [groups, members] = await Promise.all([
        api("GET", "/api/v1/groups", { signal: ctl.signal, query: q }),
        canManage ? api("GET", `/api/v1/spaces/${encodeURIComponent(space.id)}/members`, { signal: ctl.signal }) : [],
      ]);
    } catch (e) {
      if (ctl.signal.aborted) return;
      replace(body, errorBlock(e, () => load()));
      body.removeAttribute("aria-busy");
      return;
    }
    replace(body, groupsTable(groups, members, space, q, canManage, load));
    body.removeAttribute("aria-busy");
    if (focusSel) body.querySelector(focusSel)?.focus();
  }
  load();
}

function createGroupForm(space, q, reload) {
  const name = h("input", { name: "name", required: true, autocomplete: "off", spellcheck: "false", maxlength: "64" });
  const desc = h("input", { name: "description", autocomplete: "off", maxlength: "1000" });
  const error = h("p", { class: "form-error", role: "alert", dataset: { testid: "group-error" } });
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, icon("plus"), t("access.groups.new"));
  const form = h(
    "form",
    { class: "card access-add", novalidate: true, "aria-label": t("access.groups.new_in", { space: space.name }) },
    h(
      "div",
      { class: "access-add-row" },
      field("group-name", t("common.name"), name, t("access.groups.name_rule")),
      field("group-desc", t("common.description"), desc),
      h("div", { class: "access-add-submit" }, submit),
    ),
    error,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const v = name.value.trim();
    if (!v) {
      showError(error, { message: t("access.name_required") });
      name.focus();
      return;
    }
    submit.disabled = true;
    try {
      const body = { name: v };
      if (desc.value.trim()) body.description = desc.value.trim();
      const g = await api("POST", "/api/v1/groups", { body, query: q });
      toast(t("access.groups.created", { group: g.name }), "success");
      announce(t("access.groups.created", { group: g.name }));
      name.value = "";
      desc.value = "";
      await reload();
      name.focus();
    } catch (err) {
      showError(error, err);
      name.focus();
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function groupsTable(groups, members, space, q, canManage, reload) {
  if (!groups.length) return emptyState(canManage ? t("access.groups.none_admin") : t("access.groups.none"));
  const gUrl = (g) => `/api/v1/groups/${encodeURIComponent(g.name)}`;
  const fail = (err) => {
    toast(err.message, "error");
    announce(err.message, { assertive: true });
  };
  const rows = groups.map((g) => {
    const chips = g.members.length
      ? h(
          "ul",
          { class: "access-chips", "aria-label": t("access.groups.members_of", { group: g.name }) },
          g.members.map((u) =>
            h(
              "li",
              { class: "access-chip", dataset: { user: u } },
              h("span", {}, u),
              canManage
                ? h(
                    "button",
                    {
                      class: "btn btn-icon btn-small",
                      type: "button",
                      title: t("access.groups.remove_member"),
                      "aria-label": t("access.groups.remove_named", { user: u, group: g.name }),
                      onclick: async () => {
                        try {
                          await api("DELETE", `${gUrl(g)}/members/${encodeURIComponent(u)}`, { query: q });
                          toast(t("access.groups.member_removed", { user: u, group: g.name }), "success");
                          announce(t("access.groups.member_removed", { user: u, group: g.name }));
                          await reload(`tr[data-group="${CSS.escape(g.name)}"] select`);
                        } catch (err) {
                          fail(err);
                        }
                      },
                    },
                    icon("close"),
                  )
                : null,
            ),
          ),
        )
      : h("span", { class: "muted" }, t("access.groups.no_members"));
    let adder = null;
    if (canManage) {
      const free = members.map((m) => m.user).filter((u) => !g.members.includes(u));
      const pick = h(
        "select",
        { "aria-label": t("access.groups.pick_for", { group: g.name }), dataset: { testid: "group-pick" } },
        h("option", { value: "" }, free.length ? t("access.groups.pick") : t("access.groups.all_in")),
        free.map((u) => h("option", { value: u }, u)),
      );
      const add = h("button", { class: "btn btn-small", type: "submit", disabled: !free.length }, icon("plus"), t("access.groups.add_member"));
      adder = h("form", { class: "access-group-add", novalidate: true }, pick, add);
      adder.addEventListener("submit", async (e) => {
        e.preventDefault();
        const u = pick.value;
        if (!u) {
          fail({ message: t("access.groups.pick_required") });
          pick.focus();
          return;
        }
        add.disabled = true;
        try {
          await api("PUT", `${gUrl(g)}/members/${encodeURIComponent(u)}`, { query: q });
          toast(t("access.groups.member_added", { user: u, group: g.name }), "success");
          announce(t("access.groups.member_added", { user: u, group: g.name }));
          await reload(`tr[data-group="${CSS.escape(g.name)}"] select`);
        } catch (err) {
          add.disabled = false;
          fail(err);
        }
      });
    }
    return h(
      "tr",
      { dataset: { group: g.name } },
      h(
        "td",
        {},
        h("span", { class: "access-name" }, g.name),
        h("div", { class: "muted access-desc" }, h("code", {}, `group:${g.name}`)),
        g.description ? h("div", { class: "muted access-desc" }, g.description) : null,
      ),
      h("td", {}, chips, adder),
      h("td", { class: "access-date" }, fmtDate(g.created_at)),
      canManage
        ? h(
            "td",
            { class: "access-actions" },
            h(
              "button",
              {
                class: "btn btn-small btn-danger",
                type: "button",
                "aria-label": t("access.groups.delete_named", { group: g.name }),
                onclick: async () => {
                  const ok = await confirmDialog(t("access.groups.delete_confirm", { group: g.name }), {
                    danger: true,
                    confirmLabel: t("access.groups.delete"),
                  });
                  if (!ok) return;
                  try {
                    await api("DELETE", gUrl(g), { query: q });
                    toast(t("access.groups.deleted", { group: g.name }), "success");
                    announce(t("access.groups.deleted", { group: g.name }));
                    await reload();
                  } catch (err) {
                    fail(err);
                  }
                },
              },
              icon("trash"),
              t("common.delete"),
            ),
          )
        : null,
    );
  });
  return dataTable({
    attrs: { "data-testid": "groups-table" },
    caption: t("access.groups.caption", { space: space.name }),
    columns: [t("common.name"), t("access.groups.members"), t("common.created"), canManage ? t("common.actions") : null],
    rows,
  });
}

// ---------------------------------------------------------------------------------------
// Tokens

function tokenStatus(tok) {
  if (tok.revoked_at) return { key: "revoked", cls: "badge-danger" };
  if (tok.expires_at && tok.expires_at <= Date.now()) return { key: "expired", cls: "badge-warn" };
  return { key: "active", cls: "access-badge-ok" };
}

/**
 * One row per connected application: the OAuth access tokens a grant mints (an hour each, a
 * new one on every refresh) are counted on the grant's row instead of listed one by one, and
 * the grant shows when any of them was last used. Revoking the grant ends them all.
 */
function foldOAuthAccess(list) {
  const grants = new Map(list.filter((x) => x.label.startsWith("OAuth: ")).map((x) => [x.id, { ...x, access_active: 0 }]));
  const rows = [];
  for (const tok of list) {
    const grant = tok.parent_id && grants.get(tok.parent_id);
    if (!grant) {
      rows.push(grants.get(tok.id) || tok);
      continue;
    }
    if (tokenStatus(tok).key === "active") grant.access_active += 1;
    if (tok.last_used_at && (!grant.last_used_at || tok.last_used_at > grant.last_used_at)) grant.last_used_at = tok.last_used_at;
  }
  return rows;
}

function tokensPanel(panel, state, ctl) {
  const body = h("div", { "aria-busy": "true" }, h("p", { class: "loading" }, t("common.loading")));
  const newBtn = state.readOnly
    ? null
    : h("button", { class: "btn btn-primary", type: "button", onclick: () => createTokenDialog(state, reload) }, icon("plus"), t("access.token.new"));
  replace(
    panel,
    section(
      t("access.tab.tokens"),
      h(
        "div",
        { class: "access-toolbar" },
        newBtn,
        hint(state.readOnly ? t("access.token.read_only_caller") : state.machineOwner ? t("access.token.help_owner") : t("access.token.help_user")),
      ),
      body,
    ),
  );

  async function reload() {
    body.setAttribute("aria-busy", "true");
    let list;
    try {
      list = await api("GET", "/api/v1/tokens", { signal: ctl.signal });
    } catch (e) {
      if (ctl.signal.aborted) return;
      replace(body, errorBlock(e, reload));
      body.removeAttribute("aria-busy");
      return;
    }
    // Newest first.
    list.sort((a, b) => b.created_at - a.created_at);
    replace(body, tokensTable(foldOAuthAccess(list), state, reload));
    body.removeAttribute("aria-busy");
  }
  reload();
}

function tokensTable(list, state, reload) {
  if (!list.length) return emptyState(t("access.token.none"));
  const mine = state.session.token_id;
  const rows = list.map((tok) => {
    const st = tokenStatus(tok);
    return h(
      "tr",
      { dataset: { token: tok.id, status: st.key } },
      h(
        "td",
        {},
        h("span", { class: "access-name" }, tok.label || t("access.token.no_label")),
        tok.id === mine ? [" ", h("span", { class: "badge badge-info" }, t("access.token.this_session"))] : null,
      ),
      h("td", {}, h("code", { class: "access-prefix" }, `${tok.prefix}…`)),
      state.machineOwner ? h("td", {}, tok.user) : null,
      h("td", {}, tok.spaces.map((id) => h("span", { class: "badge access-space-badge" }, spaceName(state, id)))),
      h(
        "td",
        {},
        h("span", { class: `badge ${tok.read_only ? "badge-warn" : ""}` }, tok.read_only ? t("access.token.read_only") : t("access.token.read_write")),
        tok.collections ? h("div", { class: "muted" }, t("access.token.kbs", { n: tok.collections.length })) : null,
        tok.tools ? h("div", { class: "muted", dataset: { testid: "token-tools" } }, t("access.token.tools_list", { list: tok.tools.join(", ") })) : null,
        tok.access_active !== undefined
          ? h("div", { class: "muted", dataset: { testid: "token-oauth-access" } }, t("access.token.oauth_access", { n: tok.access_active }))
          : null,
      ),
      h("td", { class: "access-date" }, fmtDate(tok.created_at)),
      h("td", { class: "access-date", dataset: { testid: "token-expires" } }, tok.expires_at ? fmtDate(tok.expires_at) : t("access.token.never")),
      h("td", { class: "access-date", dataset: { testid: "token-last-used" } }, tok.last_used_at ? fmtDate(tok.last_used_at) : t("access.token.unused")),
      h("td", {}, h("span", { class: `badge ${st.cls}` }, t(`access.token.status.${st.key}`)), tok.revoked_at ? h("div", { class: "muted" }, fmtDate(tok.revoked_at)) : null),
      h(
        "td",
        { class: "access-actions" },
        st.key === "revoked" || state.readOnly
          ? null
          : h(
              "button",
              {
                class: "btn btn-small btn-danger",
                type: "button",
                "aria-label": t("access.token.revoke_named", { label: tok.label || tok.prefix }),
                onclick: async () => {
                  const msg =
                    tok.id === mine
                      ? t("access.token.revoke_self_confirm")
                      : t("access.token.revoke_confirm", { label: tok.label || tok.prefix });
                  const ok = await confirmDialog(msg, { danger: true, confirmLabel: t("access.token.revoke") });
                  if (!ok) return;
                  try {
                    await api("DELETE", `/api/v1/tokens/${encodeURIComponent(tok.id)}`);
                    toast(t("access.token.revoked"), "success");
                    announce(t("access.token.revoked"));
                    await reload();
                  } catch (err) {
                    toast(err.message, "error");
                    announce(err.message, { assertive: true });
                  }
                },
              },
              t("access.token.revoke"),
            ),
      ),
    );
  });
  return dataTable({
    attrs: { "data-testid": "tokens-table" },
    caption: t("access.tab.tokens"),
    columns: [
      t("access.token.label"),
      t("access.token.prefix"),
      state.machineOwner ? t("access.members.user") : null,
      t("access.token.spaces"),
      t("access.token.access"),
      t("common.created"),
      t("access.token.expires"),
      t("access.token.last_used"),
      t("common.status"),
      t("common.actions"),
    ],
    rows,
  });
}

/** The end of day `yyyy-mm-dd` in local time, in milliseconds. */
function endOfDay(value) {
  const [y, m, d] = value.split("-").map(Number);
  return new Date(y, m - 1, d, 23, 59, 59).getTime();
}

function createTokenDialog(state, reload) {
  const d = openDialog({ title: t("access.token.new") });
  const error = h("p", { class: "form-error", role: "alert" });
  const label = h("input", { name: "label", autocomplete: "off", maxlength: "200", placeholder: t("access.token.label_placeholder") });
  const expiry = h(
    "select",
    { name: "expiry" },
    h("option", { value: "never" }, t("access.token.never")),
    EXPIRY_DAYS.map((n) => h("option", { value: n, selected: n === "30" }, t("access.token.days", { n }))),
    h("option", { value: "date" }, t("access.token.on_date")),
  );
  const tomorrow = new Date(Date.now() + 86_400_000);
  const iso = (dt) => `${dt.getFullYear()}-${String(dt.getMonth() + 1).padStart(2, "0")}-${String(dt.getDate()).padStart(2, "0")}`;
  const date = h("input", { type: "date", name: "expires_on", min: iso(tomorrow), value: iso(new Date(Date.now() + 30 * 86_400_000)) });
  const dateField = field("token-date", t("access.token.date"), date);
  dateField.hidden = true;
  expiry.addEventListener("change", () => {
    dateField.hidden = expiry.value !== "date";
  });
  const tools = h("input", { name: "tools", autocomplete: "off", spellcheck: "false", placeholder: "time, git.git_status" });
  const readOnly = h("input", { type: "checkbox", name: "read_only", id: "token-ro" });
  const roHint = h("span", { class: "hint", id: "token-ro-hint" });
  readOnly.setAttribute("aria-describedby", roHint.id);

  // Whose token, and for which space (a token made over the API names one space).
  let userSel = null;
  const spaceSel = h("select", { name: "space" });
  const spaceField = field("token-space", t("access.token.space"), spaceSel, t("access.token.space_help"));
  const spacesFor = () => {
    if (!state.machineOwner) return state.spaces.map((s) => ({ id: s.id, name: s.name, role: s.role }));
    const u = state.users.find((x) => x.name === userSel?.value);
    return (u?.spaces || []).map((m) => ({ id: m.space_id, name: m.space, role: m.role }));
  };
  const syncSpaces = () => {
    const list = spacesFor();
    const keep = spaceSel.value || app.space;
    replace(spaceSel, list.map((s) => h("option", { value: s.id, selected: s.id === keep }, `${s.name} (${roleLabel(s.role)})`)));
    spaceField.hidden = list.length <= 1;
    const chosen = list.find((s) => s.id === spaceSel.value);
    const forced = state.readOnly || (!state.machineOwner && chosen && chosen.role === "viewer");
    readOnly.disabled = !!forced;
    if (forced) readOnly.checked = true;
    roHint.textContent = forced ? t("access.token.ro_forced") : t("access.token.ro_help");
    submit.disabled = !list.length;
    noSpace.hidden = !!list.length;
  };
  const noSpace = hint(state.machineOwner ? t("access.token.user_no_space") : t("access.space.none"));
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, t("common.create"));
  const fields = [];
  if (state.machineOwner) {
    if (!state.users.length) {
      d.body.append(emptyState(t("access.token.no_users")));
      d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.close")));
      return;
    }
    userSel = h(
      "select",
      { name: "user", onchange: syncSpaces },
      state.users.map((u) => h("option", { value: u.name }, u.name)),
    );
    fields.push(field("token-user", t("access.token.user"), userSel, t("access.token.user_help")));
  }
  const form = h(
    "form",
    { class: "access-form", id: "token-create-form", novalidate: true },
    fields,
    noSpace,
    spaceField,
    field("token-label", t("access.token.label"), label),
    field("token-expiry", t("access.token.expiry"), expiry),
    dateField,
    h("div", { class: "field" }, h("label", { class: "switch", for: "token-ro" }, readOnly, t("access.token.read_only")), roHint),
    field("token-tools", t("access.token.tools"), tools, t("access.token.tools_help")),
    error,
  );
  spaceSel.addEventListener("change", syncSpaces);
  syncSpaces();
  submit.setAttribute("form", form.id);

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const body = { label: label.value.trim(), read_only: readOnly.checked };
    const scope = tools.value.split(",").map((x) => x.trim()).filter(Boolean);
    if (scope.length) body.tools = scope;
    if (userSel) body.user = userSel.value;
    if (expiry.value === "date") {
      if (!date.value) {
        showError(error, { message: t("access.token.date_required") });
        date.focus();
        return;
      }
      body.expires_at = endOfDay(date.value);
    } else if (expiry.value !== "never") {
      body.expires_in_days = Number(expiry.value);
    }
    const space = spaceSel.value || undefined;
    submit.disabled = true;
    let issued;
    try {
      issued = await api("POST", "/api/v1/tokens", { body, query: { space_id: space } });
    } catch (err) {
      showError(error, err);
      submit.disabled = false;
      return;
    }
    showSecret(d, issued);
    reload();
  });

  d.body.append(form);
  d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), submit);
  (userSel || label).focus();
}

/** Replaces the dialog's content with the new secret: shown once, copyable, then gone. */
function showSecret(d, issued) {
  let secret = issued.token;
  const out = h("input", {
    id: "token-secret",
    class: "access-secret",
    readonly: true,
    value: secret,
    spellcheck: "false",
    autocomplete: "off",
    "data-testid": "token-secret",
  });
  const done = h("button", { class: "btn btn-primary", type: "button", onclick: () => d.close() }, t("access.token.done"));
  replace(
    d.body,
    h("p", { class: "access-warning", role: "alert" }, t("access.token.once")),
    h("div", { class: "field" }, h("label", { for: out.id }, t("access.token.secret")), h("div", { class: "row access-secret-row" }, out, copyButton(() => secret, t("access.token.copy")))),
    h(
      "dl",
      { class: "access-facts" },
      h("dt", {}, t("access.token.label")),
      h("dd", {}, issued.label || t("access.token.no_label")),
      h("dt", {}, t("access.token.expires")),
      h("dd", {}, issued.expires_at ? fmtDate(issued.expires_at) : t("access.token.never")),
      h("dt", {}, t("access.token.access")),
      h("dd", {}, issued.read_only ? t("access.token.read_only") : t("access.token.read_write")),
    ),
  );
  replace(d.footer, done);
  out.addEventListener("focus", () => out.select());
  // When the dialog goes, so does the secret: nothing else holds it.
  d.dialog.addEventListener("close", () => {
    secret = "";
    out.value = "";
  });
  announce(t("access.token.created_once"));
  done.focus();
}

// ---------------------------------------------------------------------------------------
// Users (the machine's owner only)

function usersPanel(panel, state, ctl) {
  const name = h("input", { name: "name", required: true, autocomplete: "off", spellcheck: "false", maxlength: "64" });
  const error = h("p", { class: "form-error", role: "alert" });
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, icon("plus"), t("access.user.add"));
  const form = h(
    "form",
    { class: "card access-add", "aria-label": t("access.user.add") },
    h("div", { class: "access-add-row" }, field("user-name", t("common.name"), name, t("access.name_rule")), h("div", { class: "access-add-submit" }, submit)),
    error,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    const v = name.value.trim();
    if (!v) {
      showError(error, { message: t("access.name_required") });
      name.focus();
      return;
    }
    submit.disabled = true;
    try {
      await api("POST", "/api/v1/users", { body: { name: v } });
      toast(t("access.user.added", { user: v }), "success");
      announce(t("access.user.added", { user: v }));
      await ctl.loadUsers();
      usersPanel(panel, state, ctl);
      ctl.rerender("members");
      panel.querySelector("#user-name")?.focus();
    } catch (err) {
      showError(error, err);
      submit.disabled = false;
    }
  });
  const rows = state.users.map((u) =>
    h(
      "tr",
      { dataset: { user: u.name } },
      h("td", { class: "access-name" }, u.name),
      h(
        "td",
        {},
        u.spaces.length
          ? u.spaces.map((m) => h("span", { class: "badge access-space-badge" }, `${m.space} · ${roleLabel(m.role)}`))
          : h("span", { class: "muted" }, t("access.user.no_spaces")),
      ),
      h("td", { class: "access-date" }, fmtDate(u.created_at)),
    ),
  );
  const table = state.users.length
    ? dataTable({
        attrs: { "data-testid": "users-table" },
        caption: t("access.tab.users"),
        columns: [t("common.name"), t("access.token.spaces"), t("common.created")],
        rows,
      })
    : emptyState(t("access.user.none"));
  replace(panel, section(t("access.tab.users"), hint(t("access.user.help")), form, table));
}

// ---------------------------------------------------------------------------------------
// Audit log (GET /api/v1/audit; docs/governance.md)

const AUDIT_ACTIONS = ["tool.call", "search", "write", "signin"];
const AUDIT_OUTCOMES = ["ok", "error", "denied"];

function auditPanel(panel, ctl) {
  const action = h(
    "select",
    { name: "action", id: "audit-action" },
    h("option", { value: "" }, t("access.audit.all")),
    AUDIT_ACTIONS.map((a) => h("option", { value: a }, t(`access.audit.action.${a}`))),
  );
  const outcome = h(
    "select",
    { name: "outcome", id: "audit-outcome" },
    h("option", { value: "" }, t("access.audit.all")),
    AUDIT_OUTCOMES.map((o) => h("option", { value: o }, t(`access.audit.outcome.${o}`))),
  );
  const body = h("div", { "aria-busy": "true" });
  const more = h("div", { class: "access-toolbar" });
  const exportBtn = h("button", { class: "btn", type: "button", onclick: () => exportLog() }, t("access.audit.export"));
  let rows = [];
  let next = null;

  const query = (extra) => ({ action: action.value || undefined, outcome: outcome.value || undefined, ...extra });

  async function load(append) {
    body.setAttribute("aria-busy", "true");
    let page;
    try {
      page = await api("GET", "/api/v1/audit", { signal: ctl.signal, query: query({ limit: 100, before: append ? next : undefined }) });
    } catch (e) {
      if (ctl.signal.aborted) return;
      replace(body, errorBlock(e, () => load(append)));
      body.removeAttribute("aria-busy");
      return;
    }
    rows = append ? rows.concat(page.items) : page.items;
    next = page.next_before;
    replace(body, auditTable(rows));
    replace(
      more,
      next ? h("button", { class: "btn", type: "button", "data-testid": "audit-older", onclick: () => load(true) }, t("access.audit.older")) : null,
    );
    body.removeAttribute("aria-busy");
    announce(t("access.tab.audit"));
  }

  async function exportLog() {
    const q = new URLSearchParams({ format: "jsonl" });
    for (const [k, v] of Object.entries(query({}))) if (v) q.set(k, v);
    try {
      const r = await fetch(`/api/v1/audit?${q}`, { credentials: "same-origin", headers: apiHeaders() });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      const url = URL.createObjectURL(await r.blob());
      const a = h("a", { href: url, download: "quarry-audit.jsonl" });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      toast(e.message, "error");
    }
  }

  action.addEventListener("change", () => load(false));
  outcome.addEventListener("change", () => load(false));
  replace(
    panel,
    section(
      t("access.tab.audit"),
      hint(t("access.audit.help")),
      h(
        "div",
        { class: "access-toolbar" },
        field("audit-action", t("access.audit.action"), action),
        field("audit-outcome", t("access.audit.outcome"), outcome),
        exportBtn,
      ),
      body,
      more,
    ),
  );
  load(false);
}

function auditTable(items) {
  if (!items.length) return emptyState(t("access.audit.none"));
  const outcomeClass = { ok: "access-badge-ok", error: "badge-warn", denied: "badge-danger" };
  const rows = items.map((e) =>
    h(
      "tr",
      { dataset: { event: String(e.id), action: e.action, outcome: e.outcome } },
      h("td", { class: "access-date" }, fmtDate(e.at_ms)),
      h("td", {}, e.user || t("access.audit.machine")),
      h("td", {}, AUDIT_ACTIONS.includes(e.action) ? t(`access.audit.action.${e.action}`) : e.action),
      h("td", {}, h("code", {}, e.target)),
      h("td", {}, h("span", { class: `badge ${outcomeClass[e.outcome] || ""}` }, AUDIT_OUTCOMES.includes(e.outcome) ? t(`access.audit.outcome.${e.outcome}`) : e.outcome)),
      h("td", {}, e.duration_ms === null || e.duration_ms === undefined ? "" : t("access.audit.ms", { n: e.duration_ms })),
      h("td", {}, e.client || ""),
    ),
  );
  return dataTable({
    attrs: { "data-testid": "audit-table" },
    caption: t("access.audit.caption"),
    columns: [
      t("access.audit.when"),
      t("access.audit.user"),
      t("access.audit.action"),
      t("access.audit.target"),
      t("access.audit.outcome"),
      t("access.audit.duration"),
      t("access.audit.client"),
    ],
    rows,
  });
}
