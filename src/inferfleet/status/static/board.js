// The inferfleet board: polls /api/status and draws the fleet.
// Every text from the server goes in through textContent (never innerHTML):
// service and model names come from files and servers.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const interval = Math.max(0.2, parseFloat(document.body.dataset.interval) || 2) * 1000;
  const TONE = {
    healthy: "good",
    loading: "warn",
    stopped: "warn",
    held: "off",
    current: "good",
    unchanged: "good",
    outdated: "warn",
    new: "warn",
    untracked: "off",
    local: "good",
    ssh: "good",
    http: "warn",
  };
  let lastOk = 0;

  function tone(state) {
    return TONE[state] || "bad";
  }

  function el(tag, props, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "cls") node.className = value;
      else if (key.startsWith("data-")) node.setAttribute(key, String(value));
      else node.setAttribute(key, String(value));
    }
    for (const child of children || []) if (child) node.appendChild(child);
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function num(value) {
    if (value === null || value === undefined) return "-";
    return Number.isInteger(value) ? String(value) : Number(value).toFixed(1);
  }

  function ms(value) {
    return value === null || value === undefined ? "-" : Math.round(value) + " ms";
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "-";
    const s = Math.floor(seconds);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function short(sha) {
    return sha ? String(sha).slice(0, 10) : "-";
  }

  function badge(state, extraCls) {
    return el("span", { cls: "badge " + tone(state) + (extraCls ? " " + extraCls : ""),
      "data-state": state, text: state });
  }

  function facts(rows) {
    const dl = el("dl");
    for (const [label, value, title] of rows) {
      if (value === undefined) continue;
      dl.appendChild(el("dt", { text: label }));
      const dd = el("dd", { title: title });
      if (value instanceof Node) dd.appendChild(value);
      else dd.textContent = value;
      dl.appendChild(dd);
    }
    return dl;
  }

  function slotBar(svc) {
    const total = svc.slots || 0;
    const busy = svc.busy_slots;
    const box = el("div", { cls: "slots", "data-busy": busy === null ? "" : busy,
      "data-total": total });
    for (let i = 0; i < Math.min(total, 64); i++) {
      box.appendChild(el("span", { cls: "slot" + (busy !== null && i < busy ? " busy" : "") }));
    }
    const label = busy === null ? "? of " + total + " busy" : busy + " of " + total + " busy";
    box.appendChild(el("span", { cls: "count", text: label }));
    return box;
  }

  function revision(rev) {
    const wrap = el("span", { cls: "revision", "data-revision": rev.state });
    wrap.appendChild(badge(rev.state));
    let text = "";
    if (rev.deployed) text += " " + short(rev.deployed);
    if (rev.head && rev.deployed !== rev.head) text += " \u2192 HEAD " + short(rev.head);
    wrap.appendChild(document.createTextNode(text));
    if (rev.reasons && rev.reasons.length) wrap.title = rev.reasons.join("; ");
    return wrap;
  }

  // A small grouped bar chart: per-stream decode and aggregate tok/s per concurrency (L-53).
  function chart(bench) {
    const levels = (bench.levels || []).filter((l) => l && l.concurrency);
    const box = el("div", { cls: "chart" });
    if (!levels.length) return box;
    const width = 300, height = 96, top = 12, bottom = 18, left = 4;
    const values = levels.flatMap((l) => [l.decode_tps || 0, l.aggregate_tps || 0]);
    const max = Math.max(1, ...values);
    const group = (width - left) / levels.length;
    const bar = Math.min(26, group / 2 - 6);
    const plot = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      role: "img", "aria-label": "last benchmark: tokens per second by concurrency" });
    plot.appendChild(svg("line", { x1: 0, x2: width, y1: height - bottom, y2: height - bottom,
      stroke: "#dfe3ea" }));
    levels.forEach((level, i) => {
      const x0 = left + i * group + group / 2 - bar - 2;
      [[level.decode_tps, "var(--bar)", "per stream"],
       [level.aggregate_tps, "var(--bar2)", "aggregate"]].forEach(([value, colour, what], j) => {
        if (value === null || value === undefined) return;
        const h = ((height - top - bottom) * value) / max;
        const x = x0 + j * (bar + 4);
        const rect = svg("rect", { x: x, y: height - bottom - h, width: bar, height: Math.max(h, 1),
          fill: colour, "data-value": value, "data-kind": what });
        rect.appendChild(svg("title", {}, what + " " + num(value) + " tok/s at " +
          level.concurrency + " stream(s)"));
        plot.appendChild(rect);
        plot.appendChild(svg("text", { x: x + bar / 2, y: height - bottom - h - 2,
          "text-anchor": "middle", "font-size": 9, fill: "#1d2330" }, num(value)));
      });
      plot.appendChild(svg("text", { x: left + i * group + group / 2, y: height - 4,
        "text-anchor": "middle", "font-size": 10, fill: "#6b7385" }, "\u00d7" + level.concurrency));
    });
    box.appendChild(plot);
    box.appendChild(el("div", { cls: "caption", text: "tok/s by concurrency: dark per stream, " +
      "light aggregate \u00b7 " + (bench.finished_at || "") + (bench.api ? " \u00b7 " + bench.api : "") +
      (bench.max_tokens ? " \u00b7 " + bench.max_tokens + " tokens" : "") }));
    return box;
  }

  function safeHref(url) {
    try {
      const parsed = new URL(url);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch (e) {
      return null;
    }
  }

  function links(svc) {
    const row = el("div", { cls: "links" });
    for (const [name, url] of Object.entries(svc.links || {})) {
      const href = safeHref(url);
      if (href) row.appendChild(el("a", { href: href, text: name, target: "_blank", rel: "noopener noreferrer" }));
    }
    return row;
  }

  function notes(list) {
    if (!list || !list.length) return null;
    return el("ul", { cls: "notes" }, list.map((n) => el("li", { text: n })));
  }

  function serviceCard(svc) {
    const card = el("article", { cls: "card " + tone(svc.state), "data-service": svc.service });
    card.appendChild(el("div", { cls: "top" }, [
      el("span", { cls: "name", text: svc.service }), badge(svc.state, "state")]));
    const rows = [
      ["host", svc.host],
      ["url", svc.url],
      ["pid", svc.pid === null ? "-" : svc.pid + (svc.pid_source ? " (" + svc.pid_source + ")" : "")],
      ["uptime", duration(svc.uptime_s)],
    ];
    if (svc.kind === "llm") {
      rows.push(["model", svc.model || "-"]);
      // A swap group: each member by alias and state (the router's GET /models).
      const members = Object.entries(svc.members || {});
      if (members.length) rows.push(["members", members.map((m) => m[0] + ": " + m[1]).join(", ")]);
      rows.push(["runtime", (svc.runtime || "") + (svc.runtime_version ? " " + svc.runtime_version : "")]);
      rows.push(["context", (svc.ctx_per_slot || "-") + " per slot \u00d7 " + (svc.slots || "-")]);
      rows.push(["slots", slotBar(svc)]);
      rows.push(["deferred", num(svc.requests_deferred)]);
      rows.push(["metrics", svc.metrics]);
    }
    rows.push(["revision", revision(svc.revision)]);
    if (svc.kind === "llm") {
      const b = svc.bench;
      rows.push(["last bench", b ? num(b.levels[0].decode_tps) + " tok/s per stream, TTFT " +
        ms(b.levels[0].ttft_ms) : "no results", b ? b.summary : undefined]);
      const accepted = b ? b.levels[0].draft_acceptance : null;
      if (accepted !== null && accepted !== undefined) {
        rows.push(["drafts accepted", Math.round(accepted * 100) + " % (judge it with the rate)"]);
      }
    }
    card.appendChild(facts(rows));
    if (svc.bench) card.appendChild(chart(svc.bench));
    card.appendChild(links(svc));
    const n = notes((svc.detail ? [svc.detail] : []).concat(svc.notes || []));
    if (n) card.appendChild(n);
    return card;
  }

  function hostCard(host) {
    const card = el("article", { cls: "card " + tone(host.reach), "data-host": host.host });
    card.appendChild(el("div", { cls: "top" }, [
      el("span", { cls: "name", text: host.host }), badge(host.reach, "reach")]));
    card.appendChild(facts([
      ["address", host.address],
      ["healthy", host.healthy + " of " + host.services + " services"],
      ["checkout", short(host.checkout_head)],
      ["deploy lock", host.lock || "free"],
    ]));
    const n = notes(host.detail ? [host.detail] : []);
    if (n) card.appendChild(n);
    return card;
  }

  // The front door, one card per part: the auth proxy (Caddy) and the gateway (LiteLLM),
  // each with its state and what it reaches behind it (the proxy's upstreams, the
  // gateway's backends), as their status rows say.
  const FRONT = [
    { kind: "proxy", reach: "upstreams" },
    { kind: "gateway", reach: "backends" },
  ];

  function frontCard(kind, row, reach) {
    const card = el("article", { cls: "card " + tone(row.state), ["data-" + kind]: row.host });
    card.appendChild(el("div", { cls: "top" }, [
      el("span", { cls: "name", text: kind }), badge(row.state, "state")]));
    const behind = el("ul", { cls: "backends" }, Object.entries(row[reach] || {}).map(
      ([name, state]) => el("li", { cls: state === "ok" ? "ok" : "bad", "data-backend": name,
        text: name + ": " + (state === "ok" ? "reached" : state) })));
    card.appendChild(facts([
      ["host", row.host],
      ["url", row.url],
      ["pid", row.pid === null ? "-" : row.pid],
      ["engine", row.engine || "-"],
    ]));
    card.appendChild(behind);
    const n = notes(row.detail ? [row.detail] : []);
    if (n) card.appendChild(n);
    return card;
  }

  function fill(id, cards, emptyText) {
    const box = document.getElementById(id);
    box.replaceChildren(...(cards.length ? cards : [el("p", { cls: "empty", text: emptyText })]));
  }

  function render(doc) {
    const services = doc.services || [];
    // Only a fleet with a front door gets its section (first: it is the clients' way in).
    const front = FRONT.filter((f) => doc[f.kind]);
    let section = document.getElementById("front-door");
    if (front.length && !section) {
      section = el("section", { id: "front-door" }, [
        el("h2", { text: "Front door" }), el("div", { cls: "cards", id: "front-door-cards" })]);
      document.getElementById("llm").before(section);
    } else if (!front.length && section) {
      section.remove();
    }
    if (front.length) {
      fill("front-door-cards", front.map((f) => frontCard(f.kind, doc[f.kind], f.reach)), "");
    }
    fill("llm-cards", services.filter((s) => s.kind === "llm").map(serviceCard), "no LLM endpoints");
    fill("other-cards", services.filter((s) => s.kind !== "llm").map(serviceCard), "no other services");
    fill("host-cards", (doc.hosts || []).map(hostCard), "no hosts");
    document.getElementById("head").textContent = doc.head ? "HEAD " + short(doc.head) : "";
    const list = document.getElementById("notes");
    list.replaceChildren(...(doc.notes || []).map((n) => el("li", { text: n })));
    document.getElementById("notes-section").hidden = !(doc.notes || []).length;
  }

  function showProblem(text) {
    const banner = document.getElementById("banner");
    banner.textContent = text;
    banner.hidden = false;
    const updated = document.getElementById("updated");
    updated.dataset.state = "stale";
    if (lastOk) updated.textContent = "last update " + new Date(lastOk).toLocaleTimeString();
  }

  async function refresh() {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), Math.max(15000, interval * 4));
    try {
      const response = await fetch("/api/status", { cache: "no-store", signal: abort.signal });
      if (!response.ok) throw new Error("the board answered HTTP " + response.status);
      const doc = await response.json();
      render(doc);
      lastOk = Date.now();
      document.getElementById("banner").hidden = true;
      const updated = document.getElementById("updated");
      updated.dataset.state = "fresh";
      updated.textContent = "updated " + new Date(lastOk).toLocaleTimeString();
    } catch (error) {
      showProblem("cannot read the status: " + (error && error.message ? error.message : error));
    } finally {
      clearTimeout(timer);
      setTimeout(refresh, interval);
    }
  }

  refresh();
})();
