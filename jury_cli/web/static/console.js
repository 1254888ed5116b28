// The console's one script. Every string of a run (its PR, its agents' words) is hostile: it reaches the
// page only as text (textContent / createTextNode), never as markup; links are built from our own paths.
"use strict";

(function () {
  const main = document.getElementById("main");
  const liveBadge = document.getElementById("live");

  // el("div", {class: "x", data: {id: "f1"}}, "text", child) -> an element; strings become text nodes.
  // Children may be arrays nested to any depth (a row per item, each giving several): all are flattened,
  // so an element never reaches the page as the text "[object HTMLTableRowElement]".
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "data") for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
      else if (key === "on") for (const [k, v] of Object.entries(value)) node.addEventListener(k, v);
      else if (key === "href") node.setAttribute("href", value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function replace(node, ...children) {
    node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  }

  async function getJSON(path) {
    const response = await fetch(path, { credentials: "same-origin", cache: "no-store" });
    const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    return body;
  }

  function usd(value) {
    return value === null || value === undefined ? "–" : `$${Number(value).toFixed(4)}`;
  }

  function seconds(value) {
    if (value === null || value === undefined) return "–";
    const s = Math.round(Number(value));
    return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
  }

  function badge(text, kind) {
    return el("span", { class: `badge s-${String(kind || text).replace(/[^a-z-]/gi, "")}` }, text);
  }

  function runLink(slug) {
    return el("a", { href: `/runs/${encodeURIComponent(slug)}` }, slug);
  }

  function artifactLink(slug, name, label) {
    const path = String(name).split("/").map(encodeURIComponent).join("/");
    return el("a", { href: `/api/runs/${encodeURIComponent(slug)}/artifacts/${path}`, target: "_blank",
      rel: "noopener noreferrer" }, label || name);
  }

  // Only http(s) URLs of a run become links: a hostile target could carry javascript: or data:.
  function safeURL(url) {
    try {
      const u = new URL(String(url));
      return u.protocol === "https:" || u.protocol === "http:" ? u.href : null;
    } catch (e) {
      return null;
    }
  }

  function problem(message) {
    return el("p", { class: "problem" }, message);
  }

  function section(title, ...body) {
    return el("section", { class: "panel" }, el("h2", {}, title), ...body);
  }

  function pre(text, cls) {
    return text ? el("pre", { class: cls || "text" }, text) : null;
  }

  // --- the run list ------------------------------------------------------------------------------------

  // The list is read a page at a time (newest first, ended runs from their summaries): "more" shows one
  // page more, and every refresh reads the pages shown again, following each page's cursor.
  async function runsPage() {
    document.title = "Jury · runs";
    let pages = 1;
    const render = async () => {
      let data;
      try {
        data = await getJSON("/api/runs");
        for (let n = 1; n < pages && data.next; n++) {
          const more = await getJSON(`/api/runs?cursor=${encodeURIComponent(data.next)}`);
          data = { runs: data.runs.concat(more.runs), skipped: data.skipped.concat(more.skipped), next: more.next };
        }
      } catch (e) {
        replace(main, problem(`cannot list runs: ${e.message}`));
        return;
      }
      const rows = data.runs.map((r) =>
        el("tr", { data: { slug: r.slug, state: r.state } },
          el("td", {}, runLink(r.slug)),
          el("td", {}, badge(r.state)),
          // "#7" is a PR's number; a local branch is shown by its name, never as "#feat-b"
          el("td", {}, [r.repo, r.id && r.url ? `#${r.id}` : r.id].filter(Boolean).join(" ")),
          el("td", { class: "title" }, r.title || ""),
          el("td", { class: "num" }, r.rounds),
          el("td", { class: "num" }, `${r.findings} (${r.open} open)`),
          el("td", { class: "num" }, usd(r.spentUsd)),
          el("td", {}, r.started || "")));
      const table = rows.length
        ? el("table", { class: "runs" },
          el("thead", {}, el("tr", {}, ["run", "state", "target", "title", "rounds", "findings", "spent",
            "started"].map((h) => el("th", {}, h)))),
          el("tbody", {}, rows))
        : el("p", { class: "muted" }, "no runs yet");
      const more = data.next
        ? el("button", { type: "button", class: "more", on: { click: () => { pages += 1; render(); } } }, "more")
        : null;
      const skipped = data.skipped.length
        ? section("skipped", el("ul", {}, data.skipped.map((s) => el("li", { class: "skipped" }, `${s.slug}: `,
          s.reason))))
        : null;
      replace(main, section("runs", table, more), skipped);
    };
    await render();
    setInterval(render, 5000);
  }

  // --- one run -----------------------------------------------------------------------------------------

  // fetchedAt: when (the page's clock, performance.now()) the view was last read from the server.
  const ui = { filter: "all", session: null, view: null, message: null, fetchedAt: null };

  // Seconds since the view was read: the server's "now" has moved on by that much since it answered.
  function sinceFetch() {
    return ui.fetchedAt === null ? 0 : Math.max(0, (performance.now() - ui.fetchedAt) / 1000);
  }

  function header(v) {
    const t = v.target || {};
    const url = safeURL(t.url);
    return el("section", { class: "panel head" },
      el("h1", {}, v.slug, " ", badge(v.state)),
      el("p", {}, t.title || "", url ? el("span", {}, " · ", el("a", { href: url, rel: "noopener noreferrer" },
        `${t.repo || ""} ${t.id || ""}`.trim() || url)) : ` ${t.repo || ""} ${t.id || ""}`),
      t.stateNote ? el("p", { class: "note" }, t.stateNote) : null,
      el("p", { class: "muted" }, `started ${v.started || "–"} · updated ${v.updated || "–"} · ${v.events} events`,
        v.config ? ` · reviewers ${v.config.reviewers.join(", ")} · judge ${v.config.judge}` : ""),
      v.config && v.config.notes.length ? el("ul", { class: "notes" }, v.config.notes.map((n) => el("li", {}, n)))
        : null);
  }

  function actionBar(v) {
    const s = ui.session || {};
    if (!s.canAct) {
      return el("p", { class: "muted actions" },
        "actions need the console's token: open the URL `jury web` printed");
    }
    const button = (name, label, enabled, why) =>
      el("button", { type: "button", disabled: !enabled, title: enabled ? null : why, data: { action: name },
        on: { click: () => act(v.slug, name) } }, label);
    return el("div", { class: "actions" },
      button("cancel", "cancel", !v.terminal && !v.cancelRequested),
      // The server's own rule (actions.resume_refusal): an ended run that did not converge, on the fleet.
      button("resume", "resume", v.resumable === true, v.resumeRefusal),
      // The server's own rule (present.publish_refusal): an ended run of a PR; a local branch has none.
      s.publish ? button("publish", "re-publish", v.publishable === true, v.publishRefusal) : null,
      ui.message ? el("span", { class: "message" }, ui.message) : null);
  }

  async function act(slug, name) {
    ui.message = `${name}…`;
    renderRun();
    try {
      const response = await fetch(`/api/runs/${encodeURIComponent(slug)}/${name}`, {
        method: "POST", credentials: "same-origin", headers: { "content-type": "application/json" }, body: "{}",
      });
      const body = await response.json().catch(() => ({}));
      ui.message = response.ok ? body.message : `${name} refused: ${body.error || response.status}`;
    } catch (e) {
      ui.message = `${name} failed: ${e.message}`;
    }
    refresh();
  }

  function spendPanel(v) {
    const sp = v.spend;
    const budget = sp.budgetUsd !== null && sp.budgetUsd !== undefined ? ` of ${usd(sp.budgetUsd)}` : "";
    return section("spend",
      el("p", { class: "big", data: { testid: "spend" } }, `${usd(sp.totalUsd)}${budget}`,
        sp.reservedUsd ? ` (+${usd(sp.reservedUsd)} reserved)` : ""),
      sp.unknownCalls ? el("p", { class: "note" }, `${sp.unknownCalls} call(s) of unknown cost`) : null,
      sp.budgetRefused ? el("p", { class: "problem" }, sp.budgetRefused) : null,
      el("table", { class: "small" }, Object.entries(sp.byAgent).map(([agent, amount]) =>
        el("tr", {}, el("td", {}, agent), el("td", { class: "num" }, usd(amount))))));
  }

  function timelinePanel(v) {
    const tl = v.timeline;
    const lanes = tl.lanes.map((lane) =>
      el("div", { class: "lane", data: { agent: lane.agent } },
        el("div", { class: "who" }, lane.agent),
        el("div", { class: "track" }, lane.bars.map((b) => el("div", {
          class: `bar r-${b.role} st-${b.state} o-${String(b.outcome || "").replace(/[^a-z]/g, "")}`,
          data: {
            state: b.state, start: b.start || 0, end: b.end || 0,
            label: `${b.role} · round ${b.round}${b.finding ? ` · ${b.finding}` : ""} · ${b.state}` +
              `${b.outcome ? ` (${b.outcome})` : ""}`,
          },
        })))));
    const marks = tl.marks.map((m) => el("div", { class: "mark", title: m.label, data: { at: m.at || 0 } }, m.label));
    const panel = section("timeline",
      el("p", { class: "muted" }, el("span", { data: { testid: "elapsed" } }), " elapsed", tl.live ? " · live" : "",
        " · ", el("span", { class: "key st-running" }, "running"), " ", el("span", { class: "key st-abandoned" },
          "abandoned"), " ", el("span", { class: "key st-done" }, "done")),
      lanes.length ? el("div", { class: "timeline" }, el("div", { class: "marks" }, marks), lanes)
        : el("p", { class: "muted" }, "no agent has started yet"));
    panel.dataset.panel = "timeline";
    placeTimeline(panel, v);
    return panel;
  }

  // Lays the timeline out at the page's "now": the server's figures, with the running bars' ends and the
  // elapsed figure moved on by the time since the view was read (a run that ended does not move). Called on
  // each render and every second in between, so the bars grow without an event and without a refetch.
  function placeTimeline(panel, v) {
    const tl = v.timeline;
    const grow = tl.live ? sinceFetch() : 0;
    const elapsed = (tl.seconds || 0) + grow;
    const span = Math.max(elapsed, 1);
    const pct = (x) => `${Math.max(0, Math.min(100, (100 * (x || 0)) / span))}%`;
    for (const bar of panel.querySelectorAll(".bar")) {
      const start = Number(bar.dataset.start);
      const end = Number(bar.dataset.end) + (bar.dataset.state === "running" ? grow : 0);
      bar.style.left = pct(start);
      bar.style.width = `max(3px, ${pct(end - start)})`;
      bar.title = `${bar.dataset.label} · ${seconds(end - start)}`;
    }
    for (const mark of panel.querySelectorAll(".mark")) mark.style.left = pct(Number(mark.dataset.at));
    const figure = panel.querySelector('[data-testid="elapsed"]');
    if (figure) figure.textContent = seconds(elapsed);
  }

  function tickTimeline() {
    const panel = main.querySelector('section[data-panel="timeline"]');
    if (ui.view && ui.view.timeline.live && panel) placeTimeline(panel, ui.view);
  }

  function roundsPanel(v) {
    return section("rounds", v.rounds.length ? el("div", { class: "cards" }, v.rounds.map((r) =>
      el("div", { class: "card round", data: { round: r.n } },
        el("h3", {}, `round ${r.n} `, el("code", {}, String(r.sha).slice(0, 10)), r.ended ? "" : " · open"),
        r.prompt ? el("p", {}, artifactLink(v.slug, r.prompt, "prompt")) : null,
        el("ul", {}, r.verdicts.map((a) => el("li", {},
          el("b", {}, a.agent), " ", badge(a.state), ` ${seconds(a.seconds)} `,
          a.state === "running" && a.quietSeconds ? el("span", { class: "muted" }, `(quiet ${seconds(a.quietSeconds)}) `) : null,
          a.summary || a.error || "",
          a.rawFile ? el("span", {}, " · ", artifactLink(v.slug, a.rawFile, "output")) : null))))))
      : el("p", { class: "muted" }, "no round yet"));
  }

  function conversationPanel(v) {
    const kinds = { report: "report", finding: "finding", verdict: "verdict", turn: "contest", reply: "reply",
      answer: "answer", commit: "commit" };
    return section("conversation", el("div", { class: "talks" }, v.conversations.map((c) =>
      el("div", { class: "talk", data: { agent: c.agent } },
        el("h3", {}, c.agent),
        c.items.length ? c.items.map((it) => el("div", { class: `say k-${it.kind}` },
          el("div", { class: "say-head" }, badge(kinds[it.kind] || it.kind, it.kind),
            it.round ? ` round ${it.round}` : "", it.id ? ` ${it.id}` : "",
            it.verdict ? el("span", {}, " ", badge(it.verdict)) : null,
            it.who ? ` by ${it.who}` : "", it.sha ? el("code", {}, ` ${String(it.sha).slice(0, 10)}`) : null,
            it.loc ? el("code", {}, ` ${it.loc}`) : null),
          it.kind === "report" ? el("p", {}, it.summary || "") : null,
          it.kind === "report" ? el("details", {}, el("summary", {}, "full report"), pre(it.text)) :
            (it.kind === "reply" ? el("details", {}, el("summary", {}, "what it was told"), pre(it.text)) :
              pre(it.text)),
          it.error ? el("p", { class: "problem" }, it.error) : null,
          (it.contests || []).map((ct) => el("p", {}, `contests ${ct.id}: `, ct.text)),
          it.artifact ? artifactLink(v.slug, it.artifact, "raw output") : null))
          : el("p", { class: "muted" }, "nothing yet")))));
  }

  function verificationOf(f) {
    const parts = [];
    if (f.reproduced) parts.push(el("p", {}, badge("reproduced", "accepted"), " ", f.evidence || ""));
    if (f.testCommand || f.test) parts.push(el("p", {}, "test: ", el("code", {}, f.testCommand || f.test)));
    if (f.verification && f.verification.length) {
      parts.push(el("table", { class: "small verification" },
        el("tr", {}, ["tree", "command", "exit", "time"].map((h) => el("th", {}, h))),
        f.verification.flatMap((r) => [
          el("tr", {}, el("td", {}, r.tree), el("td", {}, el("code", {}, r.command)),
            el("td", { class: "num" }, r.exitCode === undefined ? "–" : r.exitCode), el("td", { class: "num" },
              seconds(r.seconds))),
          r.outputTail ? el("tr", {}, el("td", { colspan: 4 }, el("details", {}, el("summary", {}, "output"),
            pre(r.outputTail)))) : null,
        ])));
    }
    const vt = f.verificationTable;
    if (vt) {
      parts.push(el("p", {}, "verification: ", badge(vt.ok ? "ok" : "failed", vt.ok ? "accepted" : "error"),
        vt.reason ? ` ${vt.reason}` : "", vt.runner ? ` · ${vt.runner}` : "", ` · ${seconds(vt.seconds)}`));
      if (vt.tests && vt.tests.length) {
        parts.push(el("ul", { class: "small" }, vt.tests.map((t) =>
          el("li", {}, el("code", {}, t.id), ` fixed ${t.fixed} · reverted ${t.reverted}`))));
      }
      if (vt.coverageNote) parts.push(el("p", { class: "muted" }, vt.coverageNote));
      if (vt.weakening && vt.weakening.length) parts.push(el("p", { class: "problem" }, `weakened: ${vt.weakening.join(", ")}`));
    }
    const rf = f.refutation;
    if (rf) {
      const outcome = rf.ran ? rf.outcome || "unclear" : "skipped";
      parts.push(el("p", {}, "second opinion: ", badge(outcome, outcome === "refuted" ? "error" : "clean"), " ",
        rf.reason || rf.skipped_reason || "", rf.reviewer_agent ? ` · ${rf.reviewer_agent}` : "",
        rf.reviewer_model ? ` (${rf.reviewer_model})` : "", rf.independent === false ? " · not independent" : "",
        rf.cost_usd !== null && rf.cost_usd !== undefined ? ` · ${usd(rf.cost_usd)}` : ""));
    }
    return parts;
  }

  function findingsPanel(v) {
    const states = ["all", "open", "accepted", "rejected", "deferred", "superseded"];
    const counts = {};
    for (const f of v.findings) counts[f.status || "open"] = (counts[f.status || "open"] || 0) + 1;
    const filter = el("select", { id: "finding-filter", on: { change: (e) => { ui.filter = e.target.value; renderRun(); } } },
      states.map((s) => {
        const o = el("option", { value: s }, s === "all" ? `all (${v.findings.length})` : `${s} (${counts[s] || 0})`);
        if (s === ui.filter) o.selected = true;
        return o;
      }));
    const shown = v.findings.filter((f) => ui.filter === "all" || (f.status || "open") === ui.filter);
    return section("findings", el("p", {}, "show ", filter),
      shown.length ? el("div", { class: "findings" }, shown.map((f) =>
        el("article", { class: "finding card", data: { id: f.id, status: f.status || "open" } },
          el("h3", {}, el("code", {}, f.id), " ", badge(f.status || "open"), " ", f.claim),
          el("p", { class: "muted" }, el("code", {}, f.loc), ` · ${f.agent} · round ${f.round}`,
            f.costUsd ? ` · ${usd(f.costUsd)}` : "", f.who ? ` · by ${f.who}` : ""),
          pre(f.body),
          f.reason ? el("p", {}, el("b", {}, "verdict: "), f.reason) : null,
          verificationOf(f),
          (f.refusals || []).length ? el("details", {}, el("summary", {}, `${f.refusals.length} refused answer(s)`),
            el("ul", {}, f.refusals.map((r) => el("li", {}, r)))) : null,
          (f.reopens || []).length ? el("details", {}, el("summary", {}, `reopened ${f.reopens.length}×`),
            el("ul", {}, f.reopens.map((r) => el("li", {}, r)))) : null,
          f.patch ? el("p", {}, artifactLink(v.slug, f.patch, "patch"), f.sha ? el("code", {}, ` ${String(f.sha).slice(0, 10)}`) : "")
            : null)))
        : el("p", { class: "muted" }, ui.filter === "all" ? "no findings yet" : `no ${ui.filter} findings`));
  }

  function extrasPanel(v) {
    const fc = v.finalCheck;
    return section("record",
      fc ? el("p", {}, "second opinion on the converged claim: ", badge(fc.ran ? fc.outcome || "unclear" : "skipped"),
        " ", fc.reason || fc.skipped_reason || "") : null,
      v.commits.length ? el("ul", {}, v.commits.map((c) => el("li", {}, el("code", {}, String(c.sha).slice(0, 10)), " ",
        c.subject, c.pushed ? ` · pushed ${c.branch || ""}` : ""))) : null,
      v.toolRefusals.length ? el("details", {}, el("summary", {}, `${v.toolRefusals.length} tool call(s) refused`),
        el("ul", {}, v.toolRefusals.map((t) => el("li", {}, `${t.agent} (${t.role}): ${t.tool}: ${t.reason}`)))) : null,
      (v.published || []).length ? el("ul", { class: "published" }, v.published.map((p) => {
        const link = safeURL(p.reviewUrl);
        return el("li", {}, badge(p.ok ? "published" : "not published", p.ok ? "clean" : "error"), ` ${p.state} `,
          p.repo ? `${p.forge || ""} ${p.repo}#${p.number} ` : "", p.conclusion ? `check ${p.conclusion} ` : "",
          link ? el("a", { href: link, rel: "noopener noreferrer" }, "review") : null, p.error ? ` ${p.error}` : "");
      })) : null,
      v.artifacts.length ? el("p", {}, "artifacts: ", v.artifacts.map((a) => el("span", {}, artifactLink(v.slug, a), " ")))
        : null);
  }

  function renderRun() {
    const v = ui.view;
    if (!v) return;
    replace(main, header(v), actionBar(v), el("div", { class: "grid" }, timelinePanel(v), spendPanel(v)),
      roundsPanel(v), findingsPanel(v), conversationPanel(v), extrasPanel(v));
  }

  let pending = null;
  function refresh() {
    if (pending) return;
    pending = setTimeout(async () => {
      pending = null;
      try {
        ui.view = await getJSON(`/api/runs/${encodeURIComponent(ui.slug)}`);
        ui.fetchedAt = performance.now();
        renderRun();
      } catch (e) {
        replace(main, problem(`cannot read run ${ui.slug}: ${e.message}`));
      }
    }, 200);
  }

  async function runPage() {
    ui.slug = decodeURIComponent(location.pathname.replace(/^\/runs\//, ""));
    document.title = `Jury · ${ui.slug}`;
    try {
      ui.session = await getJSON("/api/session");
      ui.view = await getJSON(`/api/runs/${encodeURIComponent(ui.slug)}`);
      ui.fetchedAt = performance.now();
    } catch (e) {
      replace(main, problem(`cannot read run ${ui.slug}: ${e.message}`));
      return;
    }
    renderRun();
    setInterval(tickTimeline, 1000);
    const after = ui.view.position ? `?after=${encodeURIComponent(ui.view.position)}` : "";
    const source = new EventSource(`/api/runs/${encodeURIComponent(ui.slug)}/events${after}`);
    source.addEventListener("open", () => { liveBadge.textContent = "live"; liveBadge.className = "live on"; });
    source.addEventListener("error", () => { liveBadge.textContent = "reconnecting…"; liveBadge.className = "live off"; });
    for (const name of ["log", "reset", "alive"]) source.addEventListener(name, (e) => {
      liveBadge.textContent = "live"; liveBadge.className = "live on"; liveBadge.title = "";
      refresh();
    });
    // The store did not answer (the stream keeps trying): the page says so instead of looking current.
    source.addEventListener("problem", (e) => {
      let why = "the store did not answer";
      try { why = JSON.parse(e.data).error || why; } catch (err) { /* a bad frame: the general words */ }
      liveBadge.textContent = "store unreachable"; liveBadge.className = "live off"; liveBadge.title = why;
    });
  }

  // --- the fleet ---------------------------------------------------------------------------------------

  function notAvailable(part) {
    return part && part.available === false ? el("p", { class: "muted unavailable" }, `not available: ${part.why}`) : null;
  }

  function table(head, rows) {
    return el("table", { class: "small" }, el("tr", {}, head.map((h) => el("th", {}, h))),
      rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c)))));
  }

  async function fleetPage() {
    document.title = "Jury · fleet";
    const render = async () => {
      let f;
      try {
        f = await getJSON("/api/fleet");
      } catch (e) {
        replace(main, problem(`cannot read the fleet: ${e.message}`));
        return;
      }
      const sp = f.spend;
      const spendBody = notAvailable(sp) || el("p", { class: "big", data: { testid: "day-spend" } },
        `${usd(sp.spentUsd)} spent today (${sp.day})`, sp.reservedUsd ? `, ${usd(sp.reservedUsd)} reserved` : "",
        sp.ceilingUsd !== null && sp.ceilingUsd !== undefined ? ` of the fleet's ${usd(sp.ceilingUsd)} ceiling`
          : " · no fleet ceiling (JURY_FLEET_DAY_CEILING)");
      const w = f.workers;
      const q = f.queues;
      const inflight = f.inflight;
      const sc = f.schedules;
      replace(main,
        section("workers", notAvailable(w) || (w.workers.length ? table(["worker", "host", "pid", "queues", "slots", "state", "started", "last seen"],
          w.workers.map((x) => [x.id, x.host, String(x.pid), x.queues.join(", "), x.concurrency === null ? "–" : String(x.concurrency),
            badge(x.state, x.state === "running" ? "clean" : "found"), x.started || "–", x.lastSeen || "–"]))
          : el("p", { class: "muted" }, "no live worker (start some with `jury worker`)"))),
        section("queues", notAvailable(q) || table(["queue", "waiting", "taken by a worker"],
          (q.queues || []).map((x) => [x.name, String(x.depth), String(x.inFlight)]))),
        section("runs in flight", notAvailable(inflight) || (inflight.runs.length ? table(["run", "state", "actions out"],
          inflight.runs.map((r) => [runLink(r.slug), badge(r.state), r.actions.map((a) => `${a.kind}${a.agent ? `:${a.agent}` : ""}`).join(", ") || "–"]))
          : el("p", { class: "muted" }, "none"))),
        section("spend", spendBody),
        section("schedules", notAvailable(sc) || (sc.schedules.length ? table(["schedule", "kind", "cron", "repos", "last firing", "next firing"],
          sc.schedules.map((x) => [x.name, x.kind, x.cron, x.repos.join(", "),
            x.last ? `${x.last.slot} ${x.last.ok ? "ok" : "FAILED"} by ${x.last.by}: ${x.last.outcome}` : (sc.note ? "?" : "never"),
            x.next])) : el("p", { class: "muted" }, "no [[schedules]] in the operator's config")),
          sc.note ? el("p", { class: "muted" }, sc.note) : null));
    };
    await render();
    setInterval(render, 5000);
  }

  const pages = { runs: runsPage, run: runPage, fleet: fleetPage };
  (pages[document.body.dataset.page] || runsPage)();
})();
