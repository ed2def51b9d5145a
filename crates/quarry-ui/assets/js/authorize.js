// The OAuth consent page (#/authorize?<the authorization request>): an application (an MCP
// connector in a desktop or browser assistant) asks to act as the signed-in person. The
// person picks the spaces, write access and tools it gets; the server checks the request
// again, records the grant and says where to send the browser (the application's redirect
// URI with a one-time code). Nothing here is trusted: the server re-checks everything.

import { app, t, h, api, replace, errorBlock, pageHeader, toast } from "./app.js";

export async function render({ root, query, signal }) {
  const request = query.toString();
  let info;
  try {
    info = await api("GET", "/api/v1/oauth/authorize", { query: Object.fromEntries(query), signal });
  } catch (e) {
    replace(root, pageHeader(t("oauth.cannot_title")), errorBlock(e));
    return;
  }
  if (info.refused) {
    location.assign(info.redirect_to);
    return;
  }
  const session = app.session;
  const spaces = session.spaces || [];
  const client = info.client_name;
  const readOnlyToken = !!session.read_only;

  const spaceBoxes = spaces.map((sp) =>
    h(
      "label",
      { class: "switch" },
      h("input", { type: "checkbox", name: "space", value: sp.id, checked: sp.id === app.space || spaces.length === 1 }),
      sp.name,
    ),
  );
  const readOnly = h("input", {
    type: "checkbox",
    id: "oauth-read-only",
    name: "read_only",
    checked: !info.wants_write || readOnlyToken,
    disabled: readOnlyToken,
  });
  const tools = h("input", {
    type: "text",
    id: "oauth-tools",
    name: "tools",
    autocomplete: "off",
    placeholder: "time, git.git_status",
    "aria-describedby": "oauth-tools-help",
  });
  const allow = h("button", { class: "btn btn-primary", type: "submit", id: "oauth-allow" }, t("oauth.allow"));
  const deny = h("button", { class: "btn", type: "button", id: "oauth-deny" }, t("oauth.deny"));
  const status = h("p", { class: "muted", role: "status" });

  async function answer(approve) {
    const picked = spaceBoxes.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
    if (approve && !picked.length) {
      toast(t("oauth.pick_space"), "error");
      return;
    }
    const toolList = tools.value
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    allow.disabled = deny.disabled = true;
    replace(status, t("oauth.sending"));
    try {
      const out = await api("POST", "/api/v1/oauth/authorize", {
        body: {
          request,
          approve,
          spaces: picked,
          read_only: readOnly.checked,
          tools: toolList.length ? toolList : undefined,
        },
      });
      replace(status, approve ? t("oauth.returning", { client }) : t("oauth.declined"));
      location.assign(out.redirect_to);
    } catch (e) {
      allow.disabled = deny.disabled = false;
      replace(status, "");
      toast(e.message, "error");
    }
  }
  deny.addEventListener("click", () => answer(false));
  const form = h(
    "form",
    {
      class: "oauth-consent",
      "aria-labelledby": "oauth-title",
      onsubmit: (e) => {
        e.preventDefault();
        answer(true);
      },
    },
    h("p", {}, t("oauth.intro", { client, user: session.user ? session.user.name : "" })),
    h("p", { class: "muted" }, t("oauth.redirect", { host: info.redirect_host })),
    h("fieldset", { class: "field" }, h("legend", {}, t("oauth.spaces")), ...spaceBoxes),
    h(
      "div",
      { class: "field" },
      h("label", { class: "switch", for: "oauth-read-only" }, readOnly, t("oauth.read_only")),
      h("p", { class: "muted" }, readOnlyToken ? t("oauth.read_only_forced") : info.wants_write ? t("oauth.wants_write") : t("oauth.asks_read")),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "oauth-tools" }, t("oauth.tools")),
      tools,
      h("p", { class: "muted", id: "oauth-tools-help" }, t("oauth.tools_help")),
    ),
    h("div", { class: "row" }, allow, deny),
    status,
  );
  const head = pageHeader(t("oauth.title", { client }));
  head.querySelector("h1").id = "oauth-title";
  replace(root, head, form);
}
