// A small, safe Markdown renderer: it builds DOM nodes (never innerHTML), so nothing in the
// text can become markup or script. CommonMark's common subset plus GFM tables,
// strikethrough and bare URLs. Links: http(s) and relative only; images: same-origin
// /api/v1/files/… and data:image/… only; anything else is shown as text. Raw HTML is text,
// except `<br>` (the converters use it inside table cells).

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

/**
 * Renders `text` as Markdown into a DocumentFragment. `headingOffset` shifts heading
 * levels (1 turns `#` into <h2>, capped at <h6>), so embedded content keeps the page's
 * heading order.
 */
export function renderMarkdown(text, { headingOffset = 0 } = {}) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").replace(/\t/g, "    ").split("\n");
  renderBlocks(lines, frag, headingOffset);
  return frag;
}

function isTableStart(lines, i) {
  return lines[i].includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("-");
}

/** Whether line `i` starts a block other than a paragraph (ends a paragraph). */
function startsBlock(lines, i) {
  const l = lines[i];
  return FENCE.test(l) || HEADING.test(l) || HR.test(l) || QUOTE.test(l) || isTableStart(lines, i) || (ITEM.test(l) && ITEM.exec(l)[3] !== undefined);
}

function renderBlocks(lines, parent, off) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) body.push(lines[i]);
      i++;
      const code = el("code", m[2] ? { class: `language-${m[2].replace(/[^\w-]/g, "")}` } : {}, body.join("\n"));
      parent.append(el("pre", {}, code));
    } else if ((m = HEADING.exec(line))) {
      const level = Math.min(6, m[1].length + off);
      parent.append(inline(el(`h${level}`), m[2] || ""));
      i++;
    } else if (HR.test(line)) {
      parent.append(el("hr"));
      i++;
    } else if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && lines[i].trim() && (QUOTE.test(lines[i]) || !startsBlock(lines, i))) {
        body.push(lines[i].replace(QUOTE, ""));
        i++;
      }
      const bq = el("blockquote");
      renderBlocks(body, bq, off);
      parent.append(bq);
    } else if (isTableStart(lines, i)) {
      i = table(lines, i, parent);
    } else if ((m = ITEM.exec(line)) && m[3] !== undefined) {
      i = list(lines, i, parent, off);
    } else {
      const body = [line];
      for (i++; i < lines.length && lines[i].trim() && !startsBlock(lines, i); i++) {
        if (/^ {0,3}(=+|-+)\s*$/.test(lines[i])) {
          // Setext heading: the paragraph so far is its text.
          const level = Math.min(6, (lines[i].trim()[0] === "=" ? 1 : 2) + off);
          parent.append(inline(el(`h${level}`), body.join("\n")));
          body.length = 0;
          continue;
        }
        body.push(lines[i]);
      }
      if (body.length) parent.append(inline(el("p"), body.map((l) => l.replace(/^\s+/, "")).join("\n")));
    }
  }
}

function list(lines, start, parent, off) {
  const first = ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = ordered ? el("ol", Number.parseInt(first[2], 10) !== 1 ? { start: Number.parseInt(first[2], 10) } : {}) : el("ul");
  let i = start;
  let loose = false;
  const items = [];
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[3] === undefined || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const contentIndent = m[1].length + m[2].length + 1;
    const body = [m[3]];
    for (i++; i < lines.length; i++) {
      const l = lines[i];
      if (!l.trim()) {
        // A blank line continues the item only when indented content follows.
        const next = lines.slice(i + 1).find((x) => x.trim());
        if (next === undefined || next.search(/\S/) < contentIndent) break;
        loose = true;
        body.push("");
        continue;
      }
      const lead = l.search(/\S/);
      if (lead >= contentIndent) body.push(l.slice(Math.min(lead, contentIndent)));
      else if (lead > indent && ITEM.test(l)) body.push(l.slice(lead));
      else if (!startsBlock(lines, i) && lead > indent) body.push(l.trim());
      else if (!startsBlock(lines, i) && !ITEM.test(l) && body[body.length - 1] !== "") body.push(l.trim());
      else break;
    }
    while (i < lines.length && !lines[i].trim()) {
      const next = lines.slice(i).find((x) => x.trim());
      const nm = next && ITEM.exec(next);
      if (!nm || nm[1].length !== indent || /\d/.test(nm[2]) !== ordered) break;
      loose = true;
      i++;
    }
    items.push(body);
  }
  for (const body of items) {
    const li = el("li");
    const task = /^\[([ xX])\]\s+/.exec(body[0]);
    if (task) {
      li.append(el("input", { type: "checkbox", disabled: "", ...(task[1] !== " " ? { checked: "" } : {}), "aria-label": task[1] !== " " ? "done" : "to do" }), " ");
      body[0] = body[0].slice(task[0].length);
    }
    renderBlocks(body, li, off);
    // Tight lists: a lone paragraph's text sits in the <li> itself.
    if (!loose) for (const p of [...li.children]) if (p.tagName === "P") p.replaceWith(...p.childNodes);
    node.append(li);
  }
  parent.append(node);
  return i;
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function table(lines, start, parent) {
  const head = splitRow(lines[start]);
  const aligns = splitRow(lines[start + 1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : c.startsWith(":") ? "left" : ""));
  const row = (cells, tag) => {
    const tr = el("tr");
    head.forEach((_, k) => {
      const cell = inline(el(tag, tag === "th" ? { scope: "col" } : {}), cells[k] ?? "");
      if (aligns[k]) cell.style.textAlign = aligns[k];
      tr.append(cell);
    });
    return tr;
  };
  const tbody = el("tbody");
  let i = start + 2;
  for (; i < lines.length && lines[i].trim() && lines[i].includes("|"); i++) tbody.append(row(splitRow(lines[i]), "td"));
  // Focusable: a wide table scrolls sideways, and keyboard users must reach it.
  const wrap = el("div", { class: "md-table", tabindex: "0" }, el("table", {}, el("thead", {}, row(head, "th")), tbody));
  parent.append(wrap);
  return i;
}

/** A link target that is http(s) or relative (no other scheme), else null. */
export function safeHref(href) {
  const h = String(href || "").trim();
  if (/^https?:\/\//i.test(h)) return h;
  // Another scheme (javascript:, data:…), or protocol-relative (`//host`, `/\host`).
  if (/^[a-z][a-z0-9+.-]*:/i.test(h) || /^[/\\]{2}/.test(h)) return null;
  return h || null;
}

function safeImage(src) {
  const s = String(src || "").trim();
  if (s.startsWith("/api/v1/files/") && !s.includes("..")) return s;
  if (/^data:image\/(png|jpe?g|gif|webp);/i.test(s)) return s;
  return null;
}

// Inline syntax, tried in order at each special character.
const INLINE = [
  ["\\", /\\([!-/:-@[-`{-~])/y, (m) => document.createTextNode(m[1])],
  ["\\", /\\\n/y, () => el("br")],
  [" ", / {2,}\n/y, () => el("br")],
  ["<", /<br\s*\/?>/iy, () => el("br")],
  ["`", /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/y, (m) => el("code", {}, m[2].replace(/\n/g, " ").replace(/^ (.*) $/, "$1"))],
  ["!", /!\[([^\]]*)\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\))*)>?(?:\s+"([^"]*)")?\s*\)/y, (m) => {
    const src = safeImage(m[2]);
    return src ? el("img", { src, alt: m[1], title: m[3], loading: "lazy" }) : document.createTextNode(m[1] ? `[${m[1]}]` : "");
  }],
  ["[", /\[((?:\\.|[^\]\\])*)\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\))*)>?(?:\s+"([^"]*)")?\s*\)/y, (m) => {
    const href = safeHref(m[2]);
    if (!href) return inline(el("span"), m[1]);
    const external = /^https?:/i.test(href);
    return inline(el("a", { href, title: m[3], ...(external ? { target: "_blank", rel: "noopener noreferrer" } : {}) }), m[1]);
  }],
  ["<", /<(https?:\/\/[^\s>]+)>/iy, (m) => el("a", { href: m[1], target: "_blank", rel: "noopener noreferrer" }, m[1])],
  ["h", /https?:\/\/[^\s<]*[^\s<.,:;"')\]]/iy, (m) => el("a", { href: m[0], target: "_blank", rel: "noopener noreferrer" }, m[0])],
  ["*_", /(\*\*|__)(?=\S)([\s\S]*?\S)\1(?![*_])/y, (m) => inline(el("strong"), m[2])],
  ["~", /~~(?=\S)([\s\S]*?\S)~~/y, (m) => inline(el("del"), m[1])],
  ["*", /\*(?=[^\s*])((?:\*\*[\s\S]+?\*\*|[^*])*?[^\s*])\*(?!\*)/y, (m) => inline(el("em"), m[1])],
  ["*", /\*(\S)\*/y, (m) => inline(el("em"), m[1])],
  ["_", /_(?=\S)([\s\S]*?\S)_(?![A-Za-z0-9])/y, (m) => inline(el("em"), m[1])],
];

/** Appends the inline Markdown `text` to `node`; returns `node`. */
export function inline(node, text) {
  let buf = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    let m = null;
    // `_` inside a word (snake_case) is not emphasis; a URL starts at a word boundary.
    if ("\\` !*_~[<h".includes(c) && !((c === "_" || c === "h") && i > 0 && /[A-Za-z0-9]/.test(text[i - 1]))) {
      for (const [first, re, make] of INLINE) {
        if (!first.includes(c)) continue;
        re.lastIndex = i;
        if ((m = re.exec(text))) {
          if (buf) node.append(document.createTextNode(buf));
          buf = "";
          node.append(make(m));
          i += m[0].length;
          break;
        }
      }
    }
    if (!m) {
      buf += c;
      i++;
    }
  }
  if (buf) node.append(document.createTextNode(buf));
  return node;
}

/** Whether `line` is a table's delimiter row (`| --- | :-: |`). */
function isDelimiterRow(line) {
  return line.includes("|") && line.includes("-") && TABLE_SEP.test(line);
}

/**
 * `text` as one line of plain text, for excerpts (chat sources): read by the same parser, so
 * no `#`, `**`, link syntax or table pipes are left. Table rows become their cells joined by
 * " · ". A passage cut from a document can start inside a table, so a row or delimiter row is
 * recognised without its header too.
 */
export function markdownText(text) {
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  const flat = [];
  let inTable = false;
  lines.forEach((line, i) => {
    if (isDelimiterRow(line)) {
      inTable = true;
      return;
    }
    const row = line.includes("|") && (inTable || /^\s*\|/.test(line) || (i + 1 < lines.length && isDelimiterRow(lines[i + 1])));
    inTable = row;
    // Each row its own paragraph: rows must not run into one another.
    if (row) flat.push(splitRow(line).filter(Boolean).join(" · "), "");
    else flat.push(line);
  });
  const root = el("div");
  root.append(renderMarkdown(flat.join("\n")));
  // Blocks and line breaks end with a space, so their words do not run together.
  for (const node of root.querySelectorAll("p, h1, h2, h3, h4, h5, h6, li, pre, blockquote, br")) node.after(" ");
  for (const img of root.querySelectorAll("img")) img.replaceWith(img.alt ? ` ${img.alt} ` : " ");
  return root.textContent.replace(/\s+/g, " ").trim();
}
