// The Chat page (`#/chat`, `#/chat/<conversation id>`): the caller's conversations, a thread
// that streams answers from `POST /api/v1/chat` (docs/chat.md) with their retrieved sources
// (RAGSourceIndicator) and tool calls (ToolCallBlock), and a composer with a knowledge-base
// picker and the request's options.
//
// Streamed text is shown as plain text while it arrives and rendered as Markdown (through
// ./markdown.js, loaded lazily) once the answer is complete; citations `[n]` then become
// buttons that reveal source n. The thread is a `role="log"` kept `aria-busy` while an
// answer streams, so screen readers are not read every token; completion, errors and tool
// state changes go through `announce()`.

import {
  api,
  announce,
  app,
  confirmDialog,
  copyButton,
  emptyState,
  errorBlock,
  fmtDate,
  fmtNumber,
  h,
  icon,
  openDialog,
  pageHeader,
  replace,
  streamPost,
  t,
  toast,
} from "./app.js";

// ---------------------------------------------------------------------------------------
// Small helpers

/** Icons this page needs beyond the shell's set (same drawing rules as `icon()`). */
const MORE_ICONS = {
  stop: ["M7 7h10v10H7z"],
  list: ["M8 6h12M8 12h12M8 18h12M4 6h.01M4 12h.01M4 18h.01"],
  sliders: ["M4 6h10M18 6h2M4 12h4M12 12h8M4 18h12M20 18h0M14 4v4M8 10v4M16 16v4"],
  check: ["M5 12l5 5 9-11"],
  fail: ["M12 3a9 9 0 1 1 0 18 9 9 0 0 1 0-18zM9 9l6 6M15 9l-6 6"],
  spin: ["M12 3a9 9 0 1 0 9 9"],
  tool: ["M14 6a4 4 0 0 0 5 5l-8 8a2 2 0 0 1-3-3l8-8a4 4 0 0 1-2-2zM14 6l3-3"],
  book: ["M4 5a2 2 0 0 1 2-2h13v16H6a2 2 0 0 0-2 2zM4 5v16M8 7h7"],
  warn: ["M12 3 2 20h20zM12 10v4M12 17h.01"],
  user: ["M12 4a4 4 0 1 1 0 8 4 4 0 0 1 0-8zM4 21a8 8 0 0 1 16 0"],
  // The product's mark (the top bar's), filled: the assistant's avatar. Rays around a point
  // read as a loading spinner.
  mark: ["M3 20 9 6l4 8 3-5 5 11z"],
  chevron: ["M6 9l6 6 6-6"],
};

function ico(name, cls) {
  if (!MORE_ICONS[name]) return icon(name);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "18");
  svg.setAttribute("height", "18");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", `icon${cls ? ` ${cls}` : ""}`);
  for (const d of MORE_ICONS[name]) {
    const p = document.createElementNS("http://www.w3.org/2000/svg", "path");
    p.setAttribute("d", d);
    svg.append(p);
  }
  return svg;
}

let uidCounter = 0;
const uid = (prefix) => `${prefix}-${++uidCounter}`;

/** `<time>` with a short relative label and the full date as its title. */
function relTime(iso) {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return h("span", {}, "—");
  const secs = (d.getTime() - Date.now()) / 1000;
  const abs = Math.abs(secs);
  let label;
  if (abs < 45) label = t("chat.just_now");
  else if (abs < 7 * 86400) {
    const rtf = new Intl.RelativeTimeFormat(app.lang, { numeric: "auto", style: "short" });
    if (abs < 3600) label = rtf.format(Math.round(secs / 60), "minute");
    else if (abs < 86400) label = rtf.format(Math.round(secs / 3600), "hour");
    else label = rtf.format(Math.round(secs / 86400), "day");
  } else label = d.toLocaleDateString(app.lang, { dateStyle: "medium" });
  return h("time", { datetime: d.toISOString(), title: fmtDate(iso) }, label);
}

/** A tool's text result, pretty-printed when it is JSON. */
function prettyResult(text) {
  if (typeof text !== "string") return JSON.stringify(text ?? null, null, 2);
  const s = text.trim();
  if (s.startsWith("{") || s.startsWith("[")) {
    try {
      return JSON.stringify(JSON.parse(s), null, 2);
    } catch {
      /* not JSON after all */
    }
  }
  return text;
}

function fmtMs(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "";
  return ms < 1000 ? t("chat.ms", { n: Math.round(ms) }) : t("chat.seconds", { n: (ms / 1000).toFixed(1) });
}

/** Is this 503 the "no chat model is configured" answer? */
function isNoModel(err) {
  return err && err.status === 503 && /chat.model|QUARRY_CHAT_MODEL/i.test(err.message || "");
}

// Markdown is another module (renderMarkdown, markdownText); loaded once, on the first
// finished answer or list of sources.
let markdownModule = null;
function loadMarkdown() {
  if (!markdownModule) {
    markdownModule = import("./markdown.js")
      .catch((e) => {
        console.warn("markdown renderer unavailable, showing plain text", e);
        return null;
      });
  }
  return markdownModule;
}

// ---------------------------------------------------------------------------------------
// The page

export async function render({ root, params, signal }) {
  const page = new ChatPage(root, signal);
  await page.start(params[0] || null);
}

class ChatPage {
  constructor(root, signal) {
    this.root = root;
    this.signal = signal;
    this.convId = null;
    this.conversations = [];
    this.kbs = [];
    this.selected = []; // knowledge-base ids, in the order chosen
    this.options = { model: "", useTools: true, maxRounds: "" };
    this.stream = null; // {controller, view}
    this.loadToken = 0;
    this.noModelMessage = null;
    signal.addEventListener("abort", () => this.stopStream(true));
  }

  // --- skeleton -------------------------------------------------------------------------

  async start(convId) {
    this.build();
    const [convs, kbs] = await Promise.allSettled([
      api("GET", "/api/v1/conversations", { signal: this.signal }),
      api("GET", "/api/v1/knowledge-bases", { signal: this.signal }),
    ]);
    if (this.signal.aborted) return;
    if (kbs.status === "fulfilled") this.kbs = Array.isArray(kbs.value) ? kbs.value : [];
    else this.kbError = kbs.reason;
    if (convs.status === "fulfilled") {
      this.conversations = Array.isArray(convs.value) ? convs.value : [];
      this.renderList();
    } else {
      replace(this.listBox, errorBlock(convs.reason, () => this.refreshList(true)));
    }
    this.renderKbPicker();
    this.probe();
    if (convId) await this.open(convId, { push: false });
    else this.newChat({ push: false, focus: false });
    this.root.dataset.ready = "true";
  }

  build() {
    this.sidebarToggle = h(
      "button",
      {
        class: "btn chat-sidebar-toggle",
        type: "button",
        "aria-expanded": "false",
        "aria-controls": "chat-sidebar",
        onclick: () => this.toggleSidebar(),
      },
      ico("list"),
      h("span", { class: "chat-btn-label" }, t("chat.conversations")),
    );
    const newBtn = h(
      "button",
      { class: "btn btn-primary", type: "button", "data-testid": "new-chat", onclick: () => this.newChat({ push: true, focus: true }) },
      icon("plus"),
      h("span", { class: "chat-btn-label" }, t("chat.new")),
    );
    this.notice = h("div", { class: "chat-notice", hidden: true, "data-testid": "chat-notice" });
    this.listBox = h("div", { class: "chat-conv-box" }, h("p", { class: "muted chat-pad" }, t("common.loading")));
    this.sidebar = h(
      "aside",
      { class: "chat-sidebar", id: "chat-sidebar", "aria-labelledby": "chat-conv-heading" },
      h("div", { class: "chat-sidebar-head" }, h("h2", { id: "chat-conv-heading" }, t("chat.conversations"))),
      this.listBox,
    );
    this.threadTitle = h("h2", { class: "chat-thread-title", id: "chat-thread-title" }, t("chat.new_title"));
    this.threadMeta = h("div", { class: "chat-thread-meta muted" });
    this.thread = h("div", {
      class: "chat-thread",
      role: "log",
      "aria-live": "polite",
      "aria-relevant": "additions",
      "aria-labelledby": "chat-thread-title",
      tabindex: "0",
      "data-testid": "chat-thread",
    });
    this.composer = this.buildComposer();
    this.mainCol = h(
      "section",
      { class: "chat-main", "aria-labelledby": "chat-thread-title" },
      h("div", { class: "chat-thread-head" }, this.threadTitle, this.threadMeta),
      this.thread,
      this.composer,
    );
    this.layout = h("div", { class: "chat-layout" }, this.sidebar, this.mainCol);
    this.sidebar.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.layout.classList.contains("sidebar-open")) {
        e.preventDefault();
        this.toggleSidebar(false);
        this.sidebarToggle.focus();
      }
    });
    replace(this.root, pageHeader(t("chat.title"), this.sidebarToggle, newBtn), this.notice, this.layout);
    // The layout fills the window below the header; the thread scrolls inside it.
    const fit = () => this.fit();
    requestAnimationFrame(fit);
    window.addEventListener("resize", fit);
    const outside = (e) => {
      for (const pop of [this.kbPop, this.optPop]) {
        if (pop && !pop.panel.hidden && !pop.wrap.contains(e.target)) pop.close(false);
      }
    };
    document.addEventListener("click", outside);
    this.signal.addEventListener("abort", () => {
      window.removeEventListener("resize", fit);
      document.removeEventListener("click", outside);
    });
  }

  fit() {
    if (!this.layout.isConnected) return;
    const top = this.layout.getBoundingClientRect().top + window.scrollY;
    this.layout.style.height = `${Math.max(420, window.innerHeight - top - 12)}px`;
  }

  toggleSidebar(force) {
    const open = force ?? !this.layout.classList.contains("sidebar-open");
    this.layout.classList.toggle("sidebar-open", open);
    this.sidebarToggle.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      const first = this.sidebar.querySelector("a, button");
      if (first) first.focus();
    }
  }

  /** Is a chat model configured? (`GET /api/v1/chat/config`; nothing is sent to a model.) */
  async probe() {
    try {
      const cfg = await api("GET", "/api/v1/chat/config", { signal: this.signal });
      if (!cfg.configured && !this.signal.aborted) this.showNoModel(t("chat.no_model_server"));
    } catch (e) {
      if (isNoModel(e) && !this.signal.aborted) this.showNoModel(e.message);
    }
  }

  showNoModel(message) {
    this.noModelMessage = message;
    replace(
      this.notice,
      ico("warn"),
      h(
        "div",
        {},
        h("p", { class: "chat-notice-title" }, t("chat.no_model_title")),
        h("p", {}, t("chat.no_model_help")),
        h("pre", { class: "chat-notice-cmd" }, "quarry serve --chat-model openai:gpt-4o-mini"),
        h("p", { class: "muted" }, t("chat.server_said", { message })),
      ),
    );
    this.notice.hidden = false;
    this.fit();
    announce(t("chat.no_model_title"), { assertive: true });
  }

  // --- conversation list ------------------------------------------------------------------

  async refreshList(showErrors = false) {
    try {
      const list = await api("GET", "/api/v1/conversations", { signal: this.signal });
      this.conversations = Array.isArray(list) ? list : [];
      this.renderList();
    } catch (e) {
      if (this.signal.aborted || e.name === "AbortError") return;
      if (showErrors) replace(this.listBox, errorBlock(e, () => this.refreshList(true)));
    }
  }

  renderList() {
    if (!this.conversations.length) {
      replace(this.listBox, h("p", { class: "muted chat-pad", "data-testid": "no-conversations" }, t("chat.no_conversations")));
      return;
    }
    const items = this.conversations.map((c) => {
      const current = c.id === this.convId;
      const title = c.title || t("chat.untitled");
      const link = h(
        "a",
        {
          class: "chat-conv-open",
          href: `#/chat/${encodeURIComponent(c.id)}`,
          "aria-current": current ? "page" : null,
          onclick: (e) => {
            if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
            e.preventDefault();
            if (c.id !== this.convId) this.open(c.id, { push: true });
            this.toggleSidebar(false);
          },
        },
        h("span", { class: "chat-conv-title" }, title),
        h("span", { class: "chat-conv-time muted" }, relTime(c.updated_at)),
      );
      const rename = h(
        "button",
        {
          class: "btn btn-icon btn-small",
          type: "button",
          "aria-label": t("chat.rename_named", { title }),
          title: t("chat.rename"),
          onclick: () => this.rename(c),
        },
        icon("edit"),
      );
      const del = h(
        "button",
        {
          class: "btn btn-icon btn-small",
          type: "button",
          "aria-label": t("chat.delete_named", { title }),
          title: t("common.delete"),
          onclick: () => this.remove(c),
        },
        icon("trash"),
      );
      return h(
        "li",
        { class: `chat-conv${current ? " current" : ""}`, "data-testid": "conversation", "data-id": c.id },
        link,
        h("div", { class: "chat-conv-actions" }, rename, del),
      );
    });
    replace(this.listBox, h("ul", { class: "chat-conv-list", "aria-labelledby": "chat-conv-heading" }, items));
  }

  /** Puts a conversation first in the list (a new one, or one just answered in). */
  touchConversation(id, title) {
    const now = new Date().toISOString();
    const at = this.conversations.findIndex((c) => c.id === id);
    const existing = at >= 0 ? this.conversations.splice(at, 1)[0] : null;
    this.conversations.unshift({ ...(existing || { id, created_at: now, message_count: 0 }), title: existing?.title || title, updated_at: now });
    this.renderList();
  }

  rename(c) {
    const input = h("input", { id: uid("chat-title"), type: "text", value: c.title || "", maxlength: "200", required: true });
    const error = h("p", { class: "form-error", role: "alert" });
    const save = h("button", { class: "btn btn-primary", type: "button" }, t("common.save"));
    const d = openDialog({ title: t("chat.rename_title") });
    const form = h(
      "form",
      { class: "chat-rename-form" },
      h("div", { class: "field" }, h("label", { for: input.id }, t("chat.title_label")), input),
      error,
    );
    const submit = async (e) => {
      e?.preventDefault();
      const title = input.value.trim();
      if (!title) {
        error.textContent = t("chat.title_required");
        input.focus();
        return;
      }
      save.disabled = true;
      try {
        await api("PATCH", `/api/v1/conversations/${encodeURIComponent(c.id)}`, { body: { title } });
        d.close();
        const item = this.conversations.find((x) => x.id === c.id);
        if (item) item.title = title;
        if (c.id === this.convId) this.threadTitle.textContent = title;
        this.renderList();
        announce(t("chat.renamed"));
        toast(t("chat.renamed"), "success");
        this.focusConversation(c.id, "a");
      } catch (err) {
        error.textContent = err.message;
        save.disabled = false;
      }
    };
    form.addEventListener("submit", submit);
    save.addEventListener("click", submit);
    d.body.append(form);
    d.footer.append(h("button", { class: "btn", type: "button", onclick: () => d.close() }, t("common.cancel")), save);
    input.select();
  }

  async remove(c) {
    const ok = await confirmDialog(t("chat.delete_confirm", { title: c.title || t("chat.untitled") }), {
      danger: true,
      confirmLabel: t("common.delete"),
    });
    if (!ok) return;
    try {
      await api("DELETE", `/api/v1/conversations/${encodeURIComponent(c.id)}`);
    } catch (err) {
      if (err.status !== 404) {
        toast(err.message, "error");
        announce(err.message, { assertive: true });
        return;
      }
    }
    const at = this.conversations.findIndex((x) => x.id === c.id);
    if (at >= 0) this.conversations.splice(at, 1);
    announce(t("chat.deleted"));
    toast(t("chat.deleted"), "success");
    if (c.id === this.convId) this.newChat({ push: false, focus: true, replaceUrl: true });
    else {
      this.renderList();
      const next = this.conversations[Math.min(at, this.conversations.length - 1)];
      if (next) this.focusConversation(next.id, "a");
      else this.input.focus();
    }
  }

  focusConversation(id, what) {
    const li = [...this.listBox.querySelectorAll("li[data-id]")].find((x) => x.dataset.id === id);
    const el = li && li.querySelector(what);
    if (el) el.focus();
  }

  // --- opening and starting conversations ---------------------------------------------

  setUrl(id, push) {
    const hash = id ? `#/chat/${encodeURIComponent(id)}` : "#/chat";
    if (location.hash === hash) return;
    // The router listens to hashchange only: history entries change without a re-render.
    if (push) history.pushState(null, "", hash);
    else history.replaceState(null, "", hash);
  }

  newChat({ push = false, focus = false, replaceUrl = false } = {}) {
    this.stopStream(true);
    this.loadToken++;
    this.convId = null;
    if (push || replaceUrl) this.setUrl(null, push);
    this.threadTitle.textContent = t("chat.new_title");
    replace(this.threadMeta);
    this.thread.removeAttribute("aria-busy");
    replace(this.thread, this.welcome());
    this.renderList();
    this.setSelected(this.selected.filter((id) => this.kbById(id)));
    this.toggleSidebar(false);
    if (focus) this.input.focus();
  }

  welcome() {
    return h(
      "div",
      { class: "chat-welcome", "data-testid": "chat-welcome" },
      h("p", { class: "chat-welcome-title" }, t("chat.welcome_title")),
      h("p", { class: "muted" }, t("chat.welcome_help")),
    );
  }

  async open(id, { push }) {
    this.stopStream(true);
    const token = ++this.loadToken;
    this.convId = id;
    if (push) this.setUrl(id, true);
    this.renderList();
    this.threadTitle.textContent = this.conversations.find((c) => c.id === id)?.title || t("chat.loading_conversation");
    replace(this.threadMeta);
    replace(this.thread, h("p", { class: "muted chat-pad" }, t("common.loading")));
    let conv;
    try {
      conv = await api("GET", `/api/v1/conversations/${encodeURIComponent(id)}`, { signal: this.signal });
    } catch (e) {
      if (this.signal.aborted || e.name === "AbortError" || token !== this.loadToken) return;
      this.threadTitle.textContent = t("chat.not_found_title");
      replace(
        this.thread,
        e.status === 404
          ? emptyState(
              t("chat.not_found"),
              h("button", { class: "btn", type: "button", onclick: () => this.newChat({ push: true, focus: true }) }, t("chat.new")),
            )
          : errorBlock(e, () => this.open(id, { push: false })),
      );
      return;
    }
    if (token !== this.loadToken) return;
    this.threadTitle.textContent = conv.title || t("chat.untitled");
    this.showConvMeta(conv);
    // The composer follows the conversation: its knowledge bases and model.
    const kbIds = (conv.kb_ids || []).map((k) => this.kbById(k)?.id).filter(Boolean);
    this.setSelected(kbIds);
    this.options.model = conv.model || "";
    if (this.modelInput) this.modelInput.value = this.options.model;
    this.syncOptionsBadge();
    // A stored conversation is not news: keep the live region quiet while it is drawn.
    this.thread.setAttribute("aria-live", "off");
    replace(this.thread);
    const msgs = conv.messages || [];
    if (!msgs.length) this.thread.append(this.welcome());
    for (const m of msgs) {
      if (m.role === "user") this.thread.append(userMessage(m.content));
      else if (m.role === "assistant") {
        const view = new AnswerView(this);
        view.fromStored(m);
        this.thread.append(view.el);
        await view.finalize();
      } else if (m.role === "system") this.thread.append(systemMessage(m.content));
    }
    this.scrollToEnd(true);
    setTimeout(() => this.thread.setAttribute("aria-live", "polite"), 50);
  }

  showConvMeta(conv) {
    const parts = [];
    if (conv.created_at) parts.push(h("span", {}, t("chat.started", { date: fmtDate(conv.created_at) })));
    if (conv.model) parts.push(h("span", {}, t("chat.model_named", { model: conv.model })));
    replace(this.threadMeta, parts);
  }

  kbById(key) {
    return this.kbs.find((k) => k.id === key) || this.kbs.find((k) => k.name === key) || null;
  }

  // --- composer ---------------------------------------------------------------------------

  buildComposer() {
    this.input = h("textarea", {
      id: "chat-input",
      class: "chat-input",
      rows: "2",
      placeholder: t("chat.placeholder"),
      "aria-describedby": "chat-input-hint",
      "data-testid": "chat-input",
    });
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
        e.preventDefault();
        if (!this.stream) this.send();
      }
    });
    this.input.addEventListener("input", () => this.autosize());
    this.sendBtn = h("button", { class: "btn btn-primary chat-send", type: "submit", "data-testid": "send" }, ico("send"), t("chat.send"));
    this.stopBtn = h(
      "button",
      { class: "btn btn-danger chat-stop", type: "button", hidden: true, "data-testid": "stop", onclick: () => this.stopStream(false) },
      ico("stop"),
      t("chat.stop"),
    );
    this.chips = h("ul", { class: "chat-chips", "aria-label": t("chat.selected_kbs"), hidden: true });
    this.kbPop = popover({
      id: "chat-kb-pop",
      button: [ico("book"), h("span", { class: "chat-btn-label" }, t("chat.kbs")), h("span", { class: "chat-count", "aria-hidden": "true", hidden: true }), h("span", { class: "sr-only chat-count-sr" })],
      label: null,
      testid: "kb-picker",
    });
    this.optPop = popover({
      id: "chat-opt-pop",
      button: [ico("sliders"), h("span", { class: "chat-btn-label" }, t("chat.options")), h("span", { class: "chat-count", "aria-hidden": "true", hidden: true }), h("span", { class: "sr-only chat-count-sr" })],
      label: t("chat.options"),
      testid: "chat-options",
    });
    this.buildOptions();
    const form = h(
      "form",
      { class: "chat-composer", "aria-label": t("chat.composer") },
      this.chips,
      h("label", { for: "chat-input", class: "sr-only" }, t("chat.message_label")),
      this.input,
      h(
        "div",
        { class: "chat-composer-bar" },
        this.kbPop.wrap,
        this.optPop.wrap,
        h("span", { id: "chat-input-hint", class: "chat-hint muted" }, t("chat.hint")),
        this.stopBtn,
        this.sendBtn,
      ),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!this.stream) this.send();
    });
    return form;
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight + 2, 240)}px`;
  }

  renderKbPicker() {
    const panel = this.kbPop.panel;
    const legendId = uid("chat-kb-legend");
    if (this.kbError) {
      replace(panel, errorBlock(this.kbError));
      return;
    }
    if (!this.kbs.length) {
      replace(
        panel,
        h("p", { class: "muted" }, t("chat.no_kbs")),
        h("a", { href: "#/kb", class: "btn btn-small" }, t("chat.create_kb")),
      );
      return;
    }
    this.kbBoxes = new Map();
    const boxes = this.kbs.map((kb) => {
      const id = uid("chat-kb");
      const box = h("input", {
        id,
        type: "checkbox",
        value: kb.id,
        checked: this.selected.includes(kb.id),
        onchange: (e) => {
          const next = this.selected.filter((x) => x !== kb.id);
          if (e.target.checked) next.push(kb.id);
          this.setSelected(next);
        },
      });
      this.kbBoxes.set(kb.id, box);
      return h(
        "label",
        { class: "chat-check", for: id },
        box,
        h("span", { class: "chat-check-name" }, kb.name),
        h("span", { class: "muted chat-check-count" }, t(kb.document_count === 1 ? "chat.kb_doc_one" : "chat.kb_docs", { n: fmtNumber(kb.document_count) })),
      );
    });
    replace(
      panel,
      h(
        "fieldset",
        { class: "chat-fieldset", "aria-labelledby": legendId },
        h("legend", { id: legendId }, t("chat.kbs_legend")),
        h("div", { class: "chat-check-list" }, boxes),
      ),
    );
  }

  setSelected(ids) {
    this.selected = ids;
    if (this.kbBoxes) for (const [id, box] of this.kbBoxes) box.checked = ids.includes(id);
    const count = this.kbPop.button.querySelector(".chat-count");
    count.textContent = String(ids.length);
    count.hidden = !ids.length;
    this.kbPop.button.querySelector(".chat-count-sr").textContent = ids.length ? t("chat.n_chosen", { n: ids.length }) : "";
    const chips = ids.map((id) => {
      const kb = this.kbById(id);
      const name = kb ? kb.name : id;
      return h(
        "li",
        { class: "chat-chip", "data-testid": "kb-chip" },
        ico("book"),
        h("span", {}, name),
        h(
          "button",
          {
            class: "chat-chip-x",
            type: "button",
            "aria-label": t("chat.kb_remove", { name }),
            title: t("chat.kb_remove", { name }),
            onclick: () => {
              this.setSelected(this.selected.filter((x) => x !== id));
              announce(t("chat.kb_removed", { name }));
              this.input.focus();
            },
          },
          icon("close"),
        ),
      );
    });
    replace(this.chips, chips);
    this.chips.hidden = !ids.length;
  }

  buildOptions() {
    const modelId = uid("chat-model");
    const roundsId = uid("chat-rounds");
    const toolsId = uid("chat-tools");
    this.modelInput = h("input", {
      id: modelId,
      type: "text",
      autocomplete: "off",
      spellcheck: "false",
      placeholder: t("chat.model_placeholder"),
      "aria-describedby": `${modelId}-hint`,
      oninput: (e) => {
        this.options.model = e.target.value.trim();
        this.syncOptionsBadge();
      },
    });
    const tools = h("input", {
      id: toolsId,
      type: "checkbox",
      checked: this.options.useTools,
      onchange: (e) => {
        this.options.useTools = e.target.checked;
        rounds.disabled = !e.target.checked;
        this.syncOptionsBadge();
      },
    });
    const rounds = h("input", {
      id: roundsId,
      type: "number",
      min: "0",
      max: "10",
      step: "1",
      inputmode: "numeric",
      placeholder: t("chat.rounds_placeholder"),
      "aria-describedby": `${roundsId}-hint`,
      oninput: (e) => {
        this.options.maxRounds = e.target.value;
        this.syncOptionsBadge();
      },
    });
    replace(
      this.optPop.panel,
      h(
        "div",
        { class: "field" },
        h("label", { for: modelId }, t("chat.model")),
        this.modelInput,
        h("span", { class: "hint", id: `${modelId}-hint` }, t("chat.model_hint")),
      ),
      h("div", { class: "field" }, h("label", { class: "switch", for: toolsId }, tools, t("chat.use_tools"))),
      h(
        "div",
        { class: "field" },
        h("label", { for: roundsId }, t("chat.max_rounds")),
        rounds,
        h("span", { class: "hint", id: `${roundsId}-hint` }, t("chat.max_rounds_hint")),
      ),
    );
  }

  /** The options button shows how many options differ from the server's defaults. */
  syncOptionsBadge() {
    const o = this.options;
    const n = (o.model ? 1 : 0) + (o.useTools ? 0 : 1) + (o.useTools && o.maxRounds !== "" ? 1 : 0);
    const count = this.optPop.button.querySelector(".chat-count");
    count.textContent = String(n);
    count.hidden = !n;
    this.optPop.button.querySelector(".chat-count-sr").textContent = n ? t("chat.n_changed", { n }) : "";
  }

  setStreaming(on) {
    this.sendBtn.hidden = on;
    this.stopBtn.hidden = !on;
    if (on) this.thread.setAttribute("aria-busy", "true");
    else this.thread.removeAttribute("aria-busy");
  }

  // --- sending ------------------------------------------------------------------------------

  requestBody(text) {
    const body = { messages: [{ role: "user", content: text }], kb_ids: [...this.selected], stream: true };
    if (this.convId) body.conversation_id = this.convId;
    if (this.options.model) body.model = this.options.model;
    if (!this.options.useTools) body.use_tools = false;
    else if (this.options.maxRounds !== "") {
      const n = Number(this.options.maxRounds);
      if (Number.isInteger(n) && n >= 0 && n <= 10) body.max_tool_rounds = n;
    }
    return body;
  }

  async send(textArg) {
    const text = (textArg ?? this.input.value).trim();
    if (!text || this.stream) return;
    if (this.options.maxRounds !== "" && this.options.useTools) {
      const n = Number(this.options.maxRounds);
      if (!Number.isInteger(n) || n < 0 || n > 10) {
        toast(t("chat.max_rounds_invalid"), "error");
        announce(t("chat.max_rounds_invalid"), { assertive: true });
        this.optPop.open();
        return;
      }
    }
    const body = this.requestBody(text);
    if (textArg === undefined) {
      this.input.value = "";
      this.autosize();
    }
    this.thread.querySelector(".chat-welcome")?.remove();
    const userEl = userMessage(text);
    const view = new AnswerView(this);
    view.setPending();
    this.thread.append(userEl, view.el);
    this.scrollToEnd(true);
    const controller = new AbortController();
    const run = { controller, view, started: false };
    this.stream = run;
    this.setStreaming(true);
    announce(t("chat.sent"));
    try {
      await streamPost("/api/v1/chat", body, (type, data) => this.onEvent(run, type, data), { signal: controller.signal });
      if (!view.finished) {
        // The stream ended without done or error (the server stopped).
        view.interrupted(t("chat.ended_early"));
      }
    } catch (e) {
      if (e.name === "AbortError" || controller.signal.aborted) {
        if (!view.finished) view.interrupted(t("chat.stopped"));
      } else if (!run.started) {
        // Refused before anything streamed: nothing was stored. Give the text back.
        userEl.remove();
        view.el.remove();
        if (!this.thread.querySelector(".msg") && !this.convId) this.thread.append(this.welcome());
        if (!this.input.value) {
          this.input.value = text;
          this.autosize();
        }
        if (isNoModel(e)) this.showNoModel(e.message);
        else {
          const block = requestError(e);
          this.thread.append(block);
          announce(t("chat.request_failed", { message: e.message }), { assertive: true });
        }
      } else {
        view.fail({ message: e.message || t("error.network"), code: "network" });
      }
    } finally {
      if (this.stream === run) {
        this.stream = null;
        this.setStreaming(false);
      }
      if (run.started) this.refreshList();
      if (!this.signal.aborted && document.activeElement === document.body) this.input.focus();
    }
  }

  onEvent(run, type, data) {
    const { view } = run;
    const mine = this.stream === run; // false once the user moved to another conversation
    switch (type) {
      case "conversation":
        run.started = true;
        if (!data || !data.id) return;
        view.messageId = data.message_id;
        if (mine) {
          if (this.convId !== data.id) {
            this.convId = data.id;
            this.setUrl(data.id, false);
          }
          this.threadTitle.textContent =
            this.conversations.find((c) => c.id === data.id)?.title || data.title || t("chat.untitled");
          if (!this.notice.hidden) {
            this.notice.hidden = true;
            this.fit();
          }
        }
        this.touchConversation(data.id, data.title);
        break;
      case "rag_source":
        view.setSources(Array.isArray(data) ? data : []);
        break;
      case "delta":
        view.appendText(data?.content || "");
        if (mine) this.scrollToEnd();
        break;
      case "tool_call":
        view.toolCall(data || {});
        if (mine) {
          announce(t("chat.tool_calling", { name: data?.name || "?" }));
          this.scrollToEnd();
        }
        break;
      case "tool_result":
        view.toolResult(data || {});
        if (mine) announce(t(data?.status === "success" ? "chat.tool_succeeded" : "chat.tool_failed_sr", { name: data?.name || "?" }));
        break;
      case "done":
        view.done(data || {}).then(() => {
          if (mine) {
            this.scrollToEnd();
            announce(t("chat.answer_complete"));
          }
        });
        break;
      case "error":
        view.fail(data || {});
        if (mine) {
          announce(t("chat.answer_failed", { message: data?.message || "" }), { assertive: true });
          this.scrollToEnd();
        }
        break;
      default:
        break;
    }
  }

  /** Stops the answer being written (Stop button; `quiet` when leaving the page). */
  stopStream(quiet) {
    const run = this.stream;
    if (!run) return;
    this.stream = null;
    run.controller.abort();
    if (!this.signal.aborted) this.setStreaming(false);
    if (!quiet) {
      announce(t("chat.stopped"));
      this.input.focus();
    }
  }

  retry(text) {
    if (this.stream) return;
    this.send(text);
  }

  scrollToEnd(force = false) {
    const el = this.thread;
    const near = el.scrollHeight - el.scrollTop - el.clientHeight < 120;
    if (force || near) el.scrollTop = el.scrollHeight;
  }
}

// ---------------------------------------------------------------------------------------
// Disclosure popovers (the knowledge-base picker and the options)

function popover({ id, button, label, testid }) {
  const btn = h(
    "button",
    { class: "btn btn-small chat-pop-btn", type: "button", "aria-expanded": "false", "aria-controls": id, "data-testid": testid },
    button,
  );
  // A panel holding a fieldset is already a group; others get one named like their button.
  const panel = h("div", { class: "chat-pop card", id, role: label ? "group" : null, "aria-label": label, hidden: true });
  const wrap = h("div", { class: "chat-pop-wrap" }, btn, panel);
  const pop = {
    wrap,
    button: btn,
    panel,
    open() {
      panel.hidden = false;
      btn.setAttribute("aria-expanded", "true");
      const first = panel.querySelector("input, select, textarea, button, a");
      if (first) first.focus();
    },
    close(focus = true) {
      panel.hidden = true;
      btn.setAttribute("aria-expanded", "false");
      if (focus) btn.focus();
    },
  };
  btn.addEventListener("click", () => (panel.hidden ? pop.open() : pop.close(false)));
  wrap.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !panel.hidden) {
      e.preventDefault();
      e.stopPropagation();
      pop.close(true);
    }
  });
  wrap.addEventListener("focusout", (e) => {
    if (!panel.hidden && e.relatedTarget && !wrap.contains(e.relatedTarget)) pop.close(false);
  });
  return pop;
}

// ---------------------------------------------------------------------------------------
// Messages

function userMessage(text) {
  return h(
    "article",
    { class: "msg msg-user", "data-testid": "user-message", "aria-label": t("chat.you_said") },
    h("div", { class: "msg-who sr-only" }, t("chat.you")),
    h("div", { class: "msg-bubble", "data-testid": "user-text" }, text),
  );
}

function systemMessage(text) {
  return h(
    "article",
    { class: "msg msg-system", "aria-label": t("chat.system") },
    h("div", { class: "msg-who muted" }, t("chat.system")),
    h("div", { class: "msg-bubble" }, text),
  );
}

/** A request refused before it streamed (400, 404, 403, network). */
function requestError(e) {
  return h(
    "div",
    { class: "chat-error", "data-testid": "chat-error" },
    ico("warn"),
    h("div", {}, h("p", { class: "chat-error-title" }, t("chat.request_refused")), h("p", {}, e.message)),
  );
}

/** One assistant answer: its tool calls, text, sources, errors and footer. */
class AnswerView {
  constructor(page) {
    this.page = page;
    this.text = "";
    this.sources = [];
    this.calls = new Map();
    this.finished = false;
    this.messageId = null;
    this.id = uid("answer");
    this.tools = h("div", { class: "msg-tools" });
    this.body = h("div", { class: "msg-body", "data-testid": "answer" });
    this.textNode = document.createTextNode("");
    this.sourceBox = h("div", { class: "msg-sources" });
    this.errorBox = h("div", { class: "msg-error" });
    this.foot = h("div", { class: "msg-foot" });
    this.el = h(
      "article",
      { class: "msg msg-assistant", "data-testid": "assistant-message", "aria-label": t("chat.assistant_said") },
      h("div", { class: "msg-avatar", "aria-hidden": "true" }, ico("mark", "icon-mark")),
      h("div", { class: "msg-content" }, h("div", { class: "msg-who sr-only" }, t("chat.assistant")), this.tools, this.body, this.sourceBox, this.errorBox, this.foot),
    );
  }

  setPending() {
    this.el.dataset.state = "streaming";
    this.pending = h("span", { class: "chat-typing", "data-testid": "thinking" }, h("span", { class: "chat-dots", "aria-hidden": "true" }, h("span"), h("span"), h("span")), t("chat.thinking"));
    replace(this.body, this.pending, this.textNode);
  }

  clearPending() {
    if (this.pending) {
      this.pending.remove();
      this.pending = null;
    }
  }

  appendText(s) {
    if (!s) return;
    this.clearPending();
    this.text += s;
    this.body.classList.add("streaming");
    this.textNode.appendData(s);
  }

  setSources(list) {
    this.sources = list;
    replace(this.sourceBox, list.length ? this.sourcesPanel() : h("p", { class: "muted chat-sources-none" }, t("chat.no_sources")));
  }

  /** RAGSourceIndicator: how many passages, and each one's file, page, score and excerpt. */
  sourcesPanel() {
    const files = [...new Set(this.sources.map((s) => s.source || s.file))];
    const items = this.sources.map((s) => {
      const kb = this.page.kbById(s.knowledge_base);
      const kbId = kb ? kb.id : s.knowledge_base;
      const q = new URLSearchParams();
      if (s.document_id) q.set("doc", s.document_id);
      if (s.page !== null && s.page !== undefined) q.set("page", String(s.page));
      const href = `#/kb/${encodeURIComponent(kbId || "")}${q.toString() ? `?${q}` : ""}`;
      const file = s.source || s.file || t("chat.unknown_file");
      const excerpt = sourceExcerpt(s.content);
      return h(
        "li",
        { class: "chat-source", id: `${this.id}-src-${s.index}`, tabindex: "-1", "data-testid": "source", "data-index": String(s.index) },
        h(
          "div",
          { class: "chat-source-head" },
          h("span", { class: "chat-source-num", "aria-hidden": "true" }, `[${s.index}]`),
          h("span", { class: "sr-only" }, t("chat.source_n", { n: s.index })),
          h("span", { class: "chat-source-file", "data-testid": "source-file" }, file),
          s.page !== null && s.page !== undefined
            ? h("span", { class: "badge", "data-testid": "source-page" }, t("chat.page", { n: s.page }))
            : null,
          typeof s.score === "number"
            ? h("span", { class: "badge badge-info", "data-testid": "source-score" }, t("chat.score", { score: s.score.toFixed(2) }))
            : null,
        ),
        kb || s.knowledge_base ? h("div", { class: "chat-source-kb muted" }, t("chat.in_kb", { name: kb ? kb.name : s.knowledge_base })) : null,
        excerpt,
        h(
          "a",
          { class: "chat-source-link", href, "data-testid": "source-link" },
          icon("doc"),
          t("chat.open_in_kb"),
          h("span", { class: "sr-only" }, s.page != null ? t("chat.open_named_page", { file, n: s.page }) : t("chat.open_named", { file })),
        ),
      );
    });
    this.sourceDetails = h(
      "details",
      { class: "chat-sources", "data-testid": "sources" },
      h(
        "summary",
        {},
        ico("book"),
        h("span", { class: "chat-sources-count" }, t(this.sources.length === 1 ? "chat.sources_one" : "chat.sources_many", { n: this.sources.length })),
        h("span", { class: "chat-sources-files muted" }, files.join(", ")),
      ),
      h("ol", { class: "chat-source-list" }, items),
    );
    return this.sourceDetails;
  }

  revealSource(n) {
    const li = this.el.querySelector(`#${CSS.escape(`${this.id}-src-${n}`)}`);
    if (!li) return;
    if (this.sourceDetails) this.sourceDetails.open = true;
    li.scrollIntoView({ block: "nearest", behavior: matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
    li.focus({ preventScroll: true });
    li.classList.add("flash");
    setTimeout(() => li.classList.remove("flash"), 1600);
  }

  /** ToolCallBlock: name, state (badge + icon + text), arguments and result. */
  toolCall(c) {
    this.clearPending();
    const block = new ToolCallBlock(c);
    this.calls.set(c.id || uid("call"), block);
    this.tools.append(block.el);
    if (!this.finished && this.page.stream) this.showWorking();
  }

  toolResult(r) {
    let block = this.calls.get(r.id);
    if (!block) {
      block = new ToolCallBlock(r);
      this.calls.set(r.id || uid("call"), block);
      this.tools.append(block.el);
    }
    block.finish(r);
  }

  showWorking() {
    if (!this.pending) {
      this.pending = h("span", { class: "chat-typing", "data-testid": "thinking" }, h("span", { class: "chat-dots", "aria-hidden": "true" }, h("span"), h("span"), h("span")), t("chat.thinking"));
      this.body.append(this.pending);
    }
  }

  async done(d) {
    this.finished = true;
    this.clearPending();
    delete this.el.dataset.state;
    const parts = [];
    if (d.finish_reason === "length") parts.push(h("span", { class: "badge badge-warn" }, t("chat.cut_off")));
    const meta = [];
    const u = d.usage;
    if (u && (u.prompt_tokens || u.completion_tokens)) meta.push(t("chat.tokens", { prompt: fmtNumber(u.prompt_tokens), completion: fmtNumber(u.completion_tokens) }));
    if (d.timings && typeof d.timings.total_ms === "number") meta.push(fmtMs(d.timings.total_ms));
    if (d.tool_rounds) meta.push(t(d.tool_rounds === 1 ? "chat.tool_round_one" : "chat.tool_rounds", { n: d.tool_rounds }));
    this.footer(parts, meta, d);
    await this.finalize();
    this.el.dataset.state = "complete";
  }

  fail(err) {
    this.finished = true;
    this.clearPending();
    this.el.dataset.state = "failed";
    for (const block of this.calls.values()) block.abandon();
    const detail = [err.code, err.status].filter(Boolean).join(" · ");
    replace(
      this.errorBox,
      h(
        "div",
        { class: "chat-error", "data-testid": "chat-error" },
        ico("warn"),
        h(
          "div",
          {},
          h("p", { class: "chat-error-title" }, t(err.code === "provider_unavailable" ? "chat.provider_unavailable" : "chat.answer_error")),
          err.message ? h("p", { class: "chat-error-msg" }, err.message) : null,
          detail ? h("p", { class: "muted chat-error-code" }, detail) : null,
        ),
      ),
    );
    this.footer([], [], null);
    this.finalize();
  }

  interrupted(reason) {
    this.finished = true;
    this.clearPending();
    this.el.dataset.state = "interrupted";
    for (const block of this.calls.values()) block.abandon();
    this.footer([h("span", { class: "badge badge-warn", "data-testid": "stopped" }, ico("stop"), reason)], [], null);
    this.finalize();
  }

  footer(badges, meta, done) {
    const retryText = this.retryText();
    replace(
      this.foot,
      badges,
      meta.length ? h("span", { class: "msg-meta muted", "data-testid": "answer-meta", title: done ? timingTitle(done) : null }, meta.join(" · ")) : null,
      this.text.trim() ? copyButton(() => this.text, t("chat.copy")) : null,
      retryText && this.el.dataset.state !== "complete" && !done
        ? h("button", { class: "btn btn-small", type: "button", onclick: () => this.page.retry(retryText) }, icon("retry"), t("chat.retry"))
        : null,
    );
  }

  /** The question this answer replies to (for Retry). */
  retryText() {
    const prev = this.el.previousElementSibling;
    return prev && prev.classList.contains("msg-user") ? prev.querySelector(".msg-bubble")?.textContent || "" : "";
  }

  /** The finished text as Markdown, with `[n]` citations linked to the sources. */
  async finalize() {
    this.body.classList.remove("streaming");
    const text = this.text;
    if (!text.trim()) {
      replace(this.body);
      this.body.hidden = true;
      return;
    }
    this.body.hidden = false;
    const renderMarkdown = (await loadMarkdown())?.renderMarkdown;
    let content = null;
    if (renderMarkdown) {
      try {
        const out = await renderMarkdown(text, { headingOffset: 2 });
        if (out instanceof Node) content = out;
      } catch (e) {
        console.warn("markdown rendering failed", e);
      }
    }
    if (this.text !== text) return; // changed meanwhile
    if (content) {
      replace(this.body, content);
      this.body.classList.add("chat-md");
      this.body.classList.remove("plain");
    } else {
      replace(this.body, text);
      this.body.classList.add("plain");
    }
    if (this.sources.length) linkCitations(this.body, this.sources, (n) => this.revealSource(n));
  }

  fromStored(m) {
    this.messageId = m.id;
    this.text = m.content || "";
    if (Array.isArray(m.sources) && m.sources.length) this.setSources(m.sources);
    for (const c of m.tool_calls || []) {
      const block = new ToolCallBlock(c);
      block.finish(c);
      this.calls.set(c.id || uid("call"), block);
      this.tools.append(block.el);
    }
    this.finished = true;
    const u = m.usage;
    const meta = [];
    if (u && (u.prompt_tokens || u.completion_tokens)) meta.push(t("chat.tokens", { prompt: fmtNumber(u.prompt_tokens), completion: fmtNumber(u.completion_tokens) }));
    if (m.status === "failed") {
      this.el.dataset.state = "failed";
      replace(
        this.errorBox,
        h(
          "div",
          { class: "chat-error", "data-testid": "chat-error" },
          ico("warn"),
          h("div", {}, h("p", { class: "chat-error-title" }, t("chat.answer_error")), h("p", {}, t("chat.failed_stored"))),
        ),
      );
      this.footer([], meta, null);
    } else if (m.status === "interrupted") {
      this.el.dataset.state = "interrupted";
      this.footer([h("span", { class: "badge badge-warn", "data-testid": "stopped" }, ico("stop"), t("chat.stopped"))], meta, null);
    } else {
      this.el.dataset.state = "complete";
      this.footer([], meta, { stored: true });
    }
  }
}

function timingTitle(d) {
  const tm = d.timings;
  if (!tm) return null;
  return t("chat.timings", {
    retrieval: fmtMs(tm.retrieval_ms),
    model: fmtMs(tm.model_ms),
    tools: fmtMs(tm.tools_ms),
    total: fmtMs(tm.total_ms),
  });
}

/**
 * A source's passage as a short plain-text excerpt (no `#` or `| --- |` from the document's
 * Markdown), filled in once markdown.js is loaded; null when the passage is empty.
 */
function sourceExcerpt(content) {
  if (!content || !content.trim()) return null;
  const p = h("p", { class: "chat-source-excerpt" });
  loadMarkdown().then((md) => {
    const text = md ? md.markdownText(content) : content.replace(/\s+/g, " ").trim();
    p.textContent = text.length > 360 ? `${text.slice(0, 360)}…` : text;
  });
  return p;
}

/** Replaces `[n]` in text (outside code and links) with buttons that reveal source n. */
function linkCitations(container, sources, reveal) {
  const byIndex = new Map(sources.map((s) => [String(s.index), s]));
  const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      if (!/\[\d+\]/.test(node.data)) return NodeFilter.FILTER_REJECT;
      if (node.parentElement.closest("code, pre, a, button")) return NodeFilter.FILTER_REJECT;
      return NodeFilter.FILTER_ACCEPT;
    },
  });
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const frag = document.createDocumentFragment();
    let last = 0;
    const re = /\[(\d+)\]/g;
    let m;
    let changed = false;
    while ((m = re.exec(node.data))) {
      const n = m[1];
      const s = byIndex.get(n);
      if (!s) continue;
      changed = true;
      frag.append(node.data.slice(last, m.index));
      const file = s.source || s.file || "";
      frag.append(
        h(
          "button",
          {
            class: "chat-cite",
            type: "button",
            "data-testid": "citation",
            "aria-label": t("chat.cite_label", { n, file }),
            title: s.page != null ? t("chat.cite_title_page", { file, n: s.page }) : file,
            onclick: () => reveal(n),
          },
          n,
        ),
      );
      last = m.index + m[0].length;
    }
    if (!changed) continue;
    frag.append(node.data.slice(last));
    node.replaceWith(frag);
  }
}

class ToolCallBlock {
  constructor(c) {
    this.name = c.name || c.tool || "?";
    this.badge = h("span", { class: "badge" });
    this.stateIcon = h("span", { class: "tool-state-icon" });
    this.duration = h("span", { class: "muted tool-duration" });
    this.args = h("pre", { class: "tool-json", tabindex: "0", "data-testid": "tool-arguments" }, JSON.stringify(c.arguments ?? {}, null, 2));
    this.result = h("pre", { class: "tool-json", tabindex: "0", "data-testid": "tool-result" }, t("chat.tool_waiting"));
    this.resultDetails = h("details", { class: "tool-section" }, h("summary", {}, t("chat.tool_result")), this.result);
    this.el = h(
      "div",
      { class: "tool-call", "data-testid": "tool-call", "data-tool": c.tool || "" },
      h(
        "div",
        { class: "tool-head" },
        this.stateIcon,
        ico("tool"),
        h("span", { class: "tool-name" }, this.name),
        c.tool && c.tool !== this.name ? h("span", { class: "muted tool-full" }, c.tool) : null,
        this.badge,
        this.duration,
      ),
      h("details", { class: "tool-section" }, h("summary", {}, t("chat.tool_arguments")), this.args),
      this.resultDetails,
    );
    this.setState("calling");
  }

  setState(state) {
    this.state = state;
    this.el.dataset.state = state;
    const spec = {
      calling: ["badge-info", "spin", "chat.tool_calling_badge"],
      success: ["badge-ok", "check", "chat.tool_success_badge"],
      error: ["badge-danger", "fail", "chat.tool_error_badge"],
      abandoned: ["badge-warn", "stop", "chat.tool_abandoned_badge"],
    }[state];
    this.badge.className = `badge ${spec[0]} tool-badge`;
    replace(this.badge, ico(spec[1], state === "calling" ? "spin" : null), t(spec[2]));
  }

  finish(r) {
    const ok = r.status === "success";
    const state = ok ? "success" : r.status === "calling" ? "calling" : "error";
    this.setState(state);
    if (r.result !== undefined && r.result !== null) this.result.textContent = prettyResult(r.result);
    else if (state !== "calling") this.result.textContent = t("chat.tool_no_result");
    if (typeof r.duration_ms === "number") this.duration.textContent = fmtMs(r.duration_ms);
  }

  abandon() {
    if (this.state === "calling") {
      this.setState("abandoned");
      this.result.textContent = t("chat.tool_no_result");
    }
  }
}
