// The OAuth consent page (#/authorize?<the authorization request>): an application (an MCP
// connector in a desktop or browser assistant) asks to act as the signed-in person. The
// person picks the spaces, the knowledge bases in them, write access and the tools it gets
// (packages and tools from a list, or named by hand); the server checks the request again,
// records the grant and says where to send the browser (the application's redirect URI with
// a one-time code). Nothing here is trusted: the server re-checks everything.

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
      h("input", {
        type: "checkbox",
        name: "space",
        value: sp.id,
        checked: sp.id === app.space || spaces.length === 1,
        onchange: () => loadKbs(),
      }),
      sp.name,
    ),
  );
  const pickedSpaces = () => spaceBoxes.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value);

  // Knowledge bases of the picked spaces; none ticked: all of them.
  const kbBox = h("div", { class: "oauth-choices", "aria-live": "polite" });
  let kbLoad = 0;
  async function loadKbs() {
    const mine = ++kbLoad;
    const ticked = new Set(checkedValues(kbBox, "kb"));
    const rows = [];
    for (const id of pickedSpaces()) {
      const sp = spaces.find((x) => x.id === id);
      let kbs = [];
      try {
        kbs = await api("GET", "/api/v1/knowledge-bases", { query: { space_id: id }, signal });
      } catch {
        // The list is a convenience: without it every knowledge base of the space is granted.
      }
      for (const kb of kbs) {
        rows.push(
          h(
            "label",
            { class: "switch" },
            h("input", { type: "checkbox", name: "kb", value: kb.id, checked: ticked.has(kb.id) }),
            spaces.length > 1 ? `${sp ? sp.name : id} / ${kb.name}` : kb.name,
          ),
        );
      }
    }
    if (mine !== kbLoad) return; // a later change of spaces answered first
    replace(kbBox, rows.length ? rows : h("p", { class: "muted" }, t("oauth.kbs_none")));
  }
  loadKbs();

  // Packages and their tools the person may hand out; none ticked (and none named): all.
  const toolBox = h("div", { class: "oauth-choices" });
  (async () => {
    let tools = [];
    try {
      tools = await api("GET", "/api/v1/mcp/tools", { signal });
    } catch {
      // Without the list the text field below still names packages and tools.
    }
    const packages = new Map();
    for (const tool of tools) {
      if (!packages.has(tool.package)) packages.set(tool.package, []);
      packages.get(tool.package).push(tool);
    }
    const groups = [...packages.keys()].sort().map((pkg) =>
      h(
        "div",
        { class: "oauth-package" },
        h("label", { class: "switch" }, h("input", { type: "checkbox", name: "tool", value: pkg }), pkg),
        h(
          "details",
          {},
          h("summary", { class: "muted" }, t("oauth.package_tools", { n: packages.get(pkg).length })),
          ...packages
            .get(pkg)
            .sort((a, b) => a.full_name.localeCompare(b.full_name))
            .map((tool) =>
              h("label", { class: "switch", title: tool.description || "" }, h("input", { type: "checkbox", name: "tool", value: tool.full_name }), tool.full_name),
            ),
        ),
      ),
    );
    replace(toolBox, groups.length ? groups : h("p", { class: "muted" }, t("oauth.tools_none")));
  })();
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
    const picked = pickedSpaces();
    if (approve && !picked.length) {
      toast(t("oauth.pick_space"), "error");
      return;
    }
    const named = tools.value
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    const toolList = [...new Set([...checkedValues(toolBox, "tool"), ...named])];
    // Only knowledge bases of spaces still picked.
    const kbList = checkedValues(kbBox, "kb");
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
          knowledge_bases: kbList.length ? kbList : undefined,
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
    h("fieldset", { class: "field", "data-testid": "oauth-kbs" }, h("legend", {}, t("oauth.kbs")), kbBox, h("p", { class: "muted" }, t("oauth.kbs_help"))),
    h(
      "div",
      { class: "field" },
      h("label", { class: "switch", for: "oauth-read-only" }, readOnly, t("oauth.read_only")),
      h("p", { class: "muted" }, readOnlyToken ? t("oauth.read_only_forced") : info.wants_write ? t("oauth.wants_write") : t("oauth.asks_read")),
    ),
    h("fieldset", { class: "field", "data-testid": "oauth-tool-picker" }, h("legend", {}, t("oauth.tool_picker")), toolBox),
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

/** Values of the ticked checkboxes named `name` inside `root`. */
function checkedValues(root, name) {
  return [...root.querySelectorAll(`input[name="${name}"]:checked`)].map((i) => i.value);
}
