// The haltwise dashboard page. Everything a run wrote reaches the page through textContent,
// never as HTML. The token comes in the URL's fragment (never sent to the server in a URL the
// server logs), is kept for this tab, and goes with every request.
"use strict";

const TOKEN_KEY = "haltwise-dashboard-token";
const state = { snapshot: null, readAt: null, interval: 0.25, offset: 0, token: "", detailBusy: false, detailAgain: false, allLive: false, flashUntil: 0, serverDown: false };
// Live runs shown until asked for all: waiting and stale ones come first, so they are among
// them; a page with thousands of rows would lay itself out slowly on every change.
const LIVE_SHOWN = 200;
// What the page shows is stale once the ledger has not answered for this many poll intervals
// (and never sooner than STALE_READ_FLOOR seconds): it may be locked, or slow.
const STALE_READS = 4;
const STALE_READ_FLOOR = 5;

function takeToken() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);
  }
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

// --- building DOM ---------------------------------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
  }
  return node;
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// Characters that would make one id pass for another (bidi overrides and isolates, marks,
// invisible ones) and control characters, shown for what they are: "evil" reversed by a
// U+202E must not read "live". Used for what names a run or a budget.
const HIDDEN = /[\u0000-\u001f\u007f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

function visible(text) {
  return String(text).replace(HIDDEN, (c) => `⟨U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
}

// An id or a key in running text: isolated, so that whatever it holds cannot reorder the text
// around it, and with its hidden characters shown.
function isolated(text) {
  return el("bdi", { text: visible(text) });
}

// Keeps one element per key, in order; updates the ones that stay, so a button being
// clicked is not swapped out from under the pointer.
function sync(container, items, keyOf, create, update) {
  const old = new Map();
  for (const child of container.children) old.set(child.dataset.key, child);
  let previous = null;
  for (const item of items) {
    const key = keyOf(item);
    let node = old.get(key);
    if (node) old.delete(key);
    else {
      node = create(item);
      node.dataset.key = key;
    }
    update(node, item);
    const expected = previous ? previous.nextSibling : container.firstChild;
    if (node !== expected) container.insertBefore(node, expected);
    previous = node;
  }
  for (const node of old.values()) node.remove();
}

// --- formatting -----------------------------------------------------------------------------

const now = () => Date.now() / 1000 + state.offset;

function duration(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`;
  const hours = Math.floor(seconds / 3600);
  if (hours < 48) return `${hours}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

function ago(epoch) {
  return `${duration(now() - epoch)} ago`;
}

function clock(epoch) {
  return new Date(epoch * 1000).toLocaleTimeString([], { hour12: false });
}

const COUNTS = new Intl.NumberFormat();
const CENTS = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const count = (n) => COUNTS.format(n);

function dollars(cost) {
  if (cost === null || cost === undefined) return "?";
  const value = Number(cost);
  return value < 1 ? `$${value.toFixed(4)}` : `$${CENTS.format(value)}`;
}

function turns(run) {
  return run.turn_limit === null || run.turn_limit === undefined
    ? `Turns ${run.turns}`
    : `Turns ${run.turns}/${run.turn_limit}`;
}

function statusOf(run) {
  if (run.gone) return ["gone", `gone ${duration(now() - run.heartbeat)}`];
  if (run.stale) return ["stale", `stale ${duration(now() - run.heartbeat)}`];
  return [run.status, run.status];
}

function lastEvent(run) {
  const last = run.last_event;
  if (!last) return "";
  return `${last.kind}${last.label ? " " + last.label : ""} · ${ago(last.at)}`;
}

// --- talking to the server ------------------------------------------------------------------

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Haltwise-Token": state.token },
    body: JSON.stringify(body || {}),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    flash(data.error || `the dashboard said ${response.status}`);
    return null;
  }
  return data;
}

function flash(message) {
  const banner = document.getElementById("banner");
  banner.hidden = false;
  banner.className = "banner warn";
  banner.textContent = message;
  state.flashUntil = Date.now() + 6000;
  clearTimeout(flash.timer);
  flash.timer = setTimeout(() => render(), 6000);
}

async function answer(runId, choice, amount, card) {
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  const done = await post(`/api/runs/${runPath(runId)}/answer`, { choice, amount });
  if (!done) for (const button of card.querySelectorAll("button")) button.disabled = false;
}

// A stop refused, or not taken yet (the ledger was busy), leaves the button to be clicked again.
async function stopRun(runId, button) {
  button.disabled = true;
  button.textContent = "Stopping…";
  const told = await post(`/api/runs/${runPath(runId)}/stop`);
  if (!told) {
    button.disabled = false;
    button.textContent = "Stop";
  }
}

function stopKey(key) {
  if (confirm(`Stop every live run spending budget “${visible(key)}”?`)) {
    post("/api/stop", { key });
  }
}

// --- the fleet ------------------------------------------------------------------------------

// A run's id in a path, the page's and the API's: one encoded segment (slashes and all). An id
// a path cannot hold as it is ("." and "..", which the browser resolves away, written %2E or
// not; and "") gets a "~" before it, and so does one that starts with "~": the server, and
// currentRun, take one leading "~" off.
const ESCAPE = "~";

function runPath(runId) {
  const escaped = ["", ".", ".."].includes(runId) || runId.startsWith(ESCAPE);
  return (escaped ? ESCAPE : "") + encodeURIComponent(runId);
}

function runLink(runId) {
  return el("a", { href: `/runs/${runPath(runId)}`, "data-nav": "", class: "mono run-id" }, isolated(runId));
}

function approvalCard(pending) {
  const amount = el("input", { type: "number", min: "1", value: "2", "aria-label": "turns to extend by" });
  const extend = el("button", { type: "button", class: "primary", text: "Extend 2" });
  amount.addEventListener("input", () => (extend.textContent = `Extend ${amount.value}`));
  const buttons = el("div", { class: "buttons" },
    el("button", { type: "button", text: "Continue", onclick: () => answer(pending.run_id, "continue", undefined, card) }),
    el("span", { class: "extend" }, extend, amount),
    el("button", { type: "button", text: "Wrap up", onclick: () => answer(pending.run_id, "wrap_up", undefined, card) }),
    el("button", { type: "button", class: "danger", text: "Abort", onclick: () => answer(pending.run_id, "abort", undefined, card) }),
  );
  extend.addEventListener("click", () => {
    const n = parseInt(amount.value, 10);
    if (n > 0) answer(pending.run_id, "extend", n, card);
  });
  const card = el("article", { class: "card" },
    el("div", { class: "card-head" }, runLink(pending.run_id), el("span", { class: "when" })),
    el("p", { class: "question", text: pending.question }),
    buttons,
  );
  return card;
}

function liveRow(run) {
  const stop = el("button", { type: "button", class: "danger small", text: "Stop" });
  stop.addEventListener("click", () => stopRun(stop.closest("tr").dataset.key, stop));
  const cells = [runLink(run.run_id), el("span", { class: "badge" }), "", "", "", "", "", "", "", stop];
  // A gone run's process is not running: nothing would hear a stop.
  stop.dataset.gone = "";
  return el("tr", {}, ...cells.map((cell, i) => el("td", { class: [3, 4, 5].includes(i) ? "num" : "" }, cell)));
}

// What a row shows that does not change with the clock: a row whose run says the same is
// left alone (the clock's part is refreshed by tick, every second).
function signature(run) {
  const last = run.last_event;
  return [run.heartbeat, run.status, run.stale, run.gone, run.turns, run.turn_limit, run.tokens, run.cost,
    last && last.at, last && last.kind, run.warnings.length].join("|");
}

function updateLiveRow(row, run) {
  row.run = run;
  const sig = signature(run);
  if (row.sig === sig) return;
  row.sig = sig;
  const cells = row.children;
  const badge = cells[1].firstChild;
  badge.className = `badge ${statusOf(run)[0]}`;
  badge.title = run.gone
    ? "not heard from for that long: its process is gone (it died without ending the run)"
    : run.stale ? "no heartbeat for that long: its process may be gone" : "";
  const stop = cells[9].firstChild;
  if (stop.dataset.gone !== String(run.gone)) {
    stop.dataset.gone = String(run.gone);
    stop.disabled = run.gone;
    stop.title = run.gone ? "its process is gone: nothing would hear a stop" : "";
  }
  setText(cells[2], turns(run));
  setText(cells[3], count(run.tokens));
  setText(cells[4], dollars(run.cost));
  refreshTimes(row);
  setText(cells[7], run.warnings.length ? run.warnings[run.warnings.length - 1] : "");
  cells[7].className = run.warnings.length ? "signal" : "";
  setText(cells[8], run.host ? `${run.host}:${run.pid}` : "");
  cells[8].title = run.model ? `model ${run.model}; ${run.limits}` : run.limits;
}

function refreshTimes(row) {
  const cells = row.children;
  setText(cells[1].firstChild, statusOf(row.run)[1]);
  setText(cells[5], duration(now() - row.run.started));
  setText(cells[6], lastEvent(row.run));
}

function recentRow(run) {
  return el("tr", {}, el("td", {}, runLink(run.run_id)), el("td", {}, el("span", { class: "badge" })),
    ...Array.from({ length: 7 }, (_, i) => el("td", { class: [2, 3, 4].includes(i) ? "num" : "" })));
}

function updateRecentRow(row, run) {
  const cells = row.children;
  const outcome = run.outcome || {};
  const badge = cells[1].firstChild;
  badge.className = `badge ${outcome.status}`;
  setText(badge, `${outcome.status}: ${outcome.reason}`);
  setText(cells[2], outcome.message);
  cells[2].className = "why";
  setText(cells[3], String(run.turns));
  setText(cells[4], count(run.tokens));
  setText(cells[5], dollars(run.cost));
  setText(cells[6], duration(run.elapsed || 0));
  setText(cells[7], run.saved.join(", ") || "—");
  setText(cells[8], clock(run.heartbeat));
}

function meter(budget) {
  return el("article", { class: "meter" },
    el("div", { class: "meter-head" }, el("strong", { class: "key" }, el("bdi")), el("span", { class: "what" })),
    el("div", { class: "bar" }, el("span", { class: "spent" }), el("span", { class: "held" })),
    el("div", { class: "meter-foot" }, el("span", { class: "numbers" }), el("span", { class: "resets" })),
  );
}

function updateMeter(node, budget) {
  const limit = budget.limit || 0;
  const spent = limit ? Math.min(100, (100 * budget.spent) / limit) : 0;
  const held = limit ? Math.min(100 - spent, (100 * budget.reserved) / limit) : 0;
  setText(node.querySelector(".key bdi"), visible(budget.key));
  setText(node.querySelector(".what"), `${budget.metric} · ${budget.window}`);
  node.querySelector(".spent").style.width = `${spent}%`;
  node.querySelector(".held").style.width = `${held}%`;
  node.classList.toggle("high", spent + held >= 90);
  const numbers = `${budget.spent_text} of ${budget.limit_text ?? "no limit"}` +
    (budget.reserved ? ` · ${budget.reserved_text} held` : "");
  setText(node.querySelector(".numbers"), numbers);
  node.querySelector(".resets").dataset.resets = budget.resets_at ?? "";
  setText(node.querySelector(".resets"), resets(budget.resets_at));
}

function resets(at) {
  if (at === null || at === undefined || at === "") return "never resets";
  const left = Number(at) - now();
  const stamp = new Date(Number(at) * 1000).toLocaleString([], { hour12: false, dateStyle: "medium", timeStyle: "short" });
  return left > 0 ? `resets in ${duration(left)} (${stamp})` : `reset at ${stamp}`;
}

function keyButtons(live) {
  const keys = [...new Set(live.flatMap((run) => run.keys))].sort();
  const node = document.getElementById("stop-keys") || el("div", { id: "stop-keys", class: "buttons" });
  sync(node, keys, (key) => key,
    (key) => el("button", { type: "button", class: "danger small", onclick: () => stopKey(key) }, "Stop all of ", isolated(key)),
    () => {});
  return node;
}

function renderFleet(snapshot) {
  const pending = snapshot.pending;
  const stale = new Set(snapshot.live.filter((run) => run.stale).map((run) => run.run_id));
  document.getElementById("approvals-section").hidden = pending.length === 0;
  sync(document.getElementById("approvals"), pending, (p) => `${p.run_id}@${p.asked}`, approvalCard,
    (card, p) => setText(card.querySelector(".when"),
      `asked ${ago(p.asked)}${stale.has(p.run_id) ? " · its run is stale: it may not hear" : ""}`));

  const live = snapshot.live;
  const total = liveTotal(snapshot);
  const waiting = live.filter((run) => run.status === "waiting").length;
  const gone = live.filter((run) => run.gone).length;
  const staleOnly = live.filter((run) => run.stale && !run.gone).length;
  // The dashboard reads at most so many live runs: the rest are counted, and said to be left out.
  const isCut = total > live.length;
  setText(document.getElementById("live-count"), `${count(total)}${isCut ? ` (${count(live.length)} read)` : ""}` +
    `${waiting ? ` · ${waiting} waiting` : ""}${staleOnly ? ` · ${staleOnly} stale` : ""}${gone ? ` · ${gone} gone` : ""}`);
  const shown = state.allLive ? live : live.slice(0, LIVE_SHOWN);
  sync(document.querySelector("#live tbody"), shown, (run) => run.run_id, liveRow, updateLiveRow);
  document.getElementById("live-empty").hidden = total > 0;
  document.getElementById("live-more").hidden = live.length <= LIVE_SHOWN;
  setText(document.getElementById("live-all"), state.allLive
    ? `Show the first ${LIVE_SHOWN} only`
    : `Show all ${count(live.length)}${isCut ? " read" : ""} (${count(LIVE_SHOWN)} shown)`);
  const cut = document.getElementById("live-cut");
  cut.hidden = !isCut;
  setText(cut, isCut ? `The list is cut: ${count(total)} runs are live, and the dashboard reads the ` +
    `${count(live.length)} that started last (the rest: haltwise runs --limit ${total}).` : "");
  const heading = document.querySelector("#live-count").parentNode;
  if (!heading.nextElementSibling.matches("#stop-keys")) heading.after(keyButtons(live));
  else keyButtons(live);

  sync(document.getElementById("budgets"), snapshot.budgets, (b) => `${b.key}|${b.metric}|${b.window}`, meter, updateMeter);
  document.getElementById("budgets-empty").hidden = snapshot.budgets.length > 0;

  sync(document.querySelector("#recent tbody"), snapshot.recent, (run) => run.run_id, recentRow, updateRecentRow);
  document.getElementById("recent-empty").hidden = snapshot.recent.length > 0;
}

// --- one run --------------------------------------------------------------------------------

// The run of a page /runs/ID: the id as runPath writes it; one typed with its slashes as they
// are is taken whole too.
function currentRun() {
  const match = /^\/runs\/(.+)$/.exec(location.pathname);
  if (!match) return null;
  let written = match[1];
  try {
    written = decodeURIComponent(written);
  } catch {
    // not percent-encoded as runPath would: taken as it is
  }
  return written.startsWith(ESCAPE) ? written.slice(ESCAPE.length) : written;
}

async function loadRun() {
  const runId = currentRun();
  if (runId === null) return;
  if (state.detailBusy) {
    state.detailAgain = true;
    return;
  }
  state.detailBusy = true;
  try {
    const response = await fetch(`/api/runs/${runPath(runId)}`, { headers: { "X-Haltwise-Token": state.token } });
    const detail = await response.json();
    if (currentRun() === runId) renderRun(runId, response.ok ? detail : null, detail.error);
  } finally {
    state.detailBusy = false;
    if (state.detailAgain) {
      state.detailAgain = false;
      loadRun();
    }
  }
}

function renderRun(runId, detail, error) {
  const title = document.getElementById("run-title");
  if (!title.firstChild || title.firstChild.nodeName !== "BDI") title.replaceChildren(el("bdi"));
  setText(title.firstChild, visible(runId));
  const status = document.getElementById("run-status");
  const stop = document.getElementById("run-stop");
  const message = document.getElementById("run-message");
  if (detail === null) {
    setText(status, "unknown");
    stop.hidden = true;
    message.hidden = false;
    setText(message, error || "no such run");
    return;
  }
  const run = detail.run;
  const [kind, label] = run.outcome ? [run.outcome.status, `${run.outcome.status}: ${run.outcome.reason}`] : statusOf(run);
  status.className = `badge ${kind}`;
  setText(status, label);
  stop.hidden = run.outcome !== null || run.gone;
  message.hidden = !run.outcome;
  setText(message, run.outcome ? run.outcome.message : "");
  sync(document.getElementById("run-approval"), detail.pending ? [detail.pending] : [],
    (p) => `${p.run_id}@${p.asked}`, approvalCard, (card, p) => setText(card.querySelector(".when"), `asked ${ago(p.asked)}`));
  const facts = [
    ["Turns", turns(run)],
    ["Tokens", count(run.tokens)],
    ["Cost", dollars(run.cost)],
    ["Elapsed", duration(run.outcome ? run.elapsed || 0 : now() - run.started)],
    ["Model", run.model || "—"],
    ["Where", run.host ? `${run.host}:${run.pid}` : "—"],
    ["Limits", run.limits || "—"],
    ["Budget keys", run.keys.map(visible).join(", ") || "—"],
  ];
  if (run.saved.length) facts.push(["Left unspent", run.saved.join(", ")]);
  sync(document.getElementById("run-facts"), facts, (f) => f[0],
    (f) => el("div", { class: f[1].length > 24 ? "wide" : "" }, el("dt", { text: f[0] }), el("dd")),
    (node, f) => setText(node.lastChild, f[1]));
  chart(document.getElementById("run-chart"), detail.spend);
  setText(document.getElementById("run-since"), `What this dashboard saw since ${clock(detail.watched_since)}; each heartbeat brings the events since the one before.`);
  const entries = detail.timeline.slice().reverse();
  sync(document.getElementById("run-timeline"), entries, (e) => `${e.at}|${e.kind}|${e.label}`,
    (e) => el("li", { class: `entry ${e.kind}` },
      el("time", { text: clock(e.at) }),
      el("span", { class: "kind", text: e.kind }),
      el("span", { class: "label", text: e.label }),
      e.decision ? el("span", { class: "decision", text: e.decision }) : null),
    () => {});
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A step line of the run's spend: dollars when every point has a price, else tokens.
function chart(container, points) {
  container.replaceChildren();
  if (points.length === 0) {
    container.append(el("p", { class: "empty", text: "No spend seen yet." }));
    return;
  }
  const money = points.every((p) => p.cost !== null);
  const value = (p) => (money ? p.cost : p.tokens);
  const width = 720, height = 220, left = 64, right = 16, top = 16, bottom = 32;
  const start = points[0].at;
  const end = Math.max(points[points.length - 1].at, start + 1);
  const high = Math.max(...points.map(value), money ? 0.0001 : 1);
  const x = (at) => left + ((at - start) / (end - start)) * (width - left - right);
  const y = (v) => height - bottom - (v / high) * (height - top - bottom);
  let line = `M ${x(points[0].at)} ${y(value(points[0]))}`;
  for (const p of points.slice(1)) line += ` H ${x(p.at)} V ${y(value(p))}`;
  const area = `${line} V ${y(0)} H ${x(points[0].at)} Z`;
  const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${money ? "dollars" : "tokens"} spent over time` });
  picture.append(
    svg("line", { x1: left, x2: width - right, y1: y(0), y2: y(0), class: "axis" }),
    svg("line", { x1: left, x2: width - right, y1: y(high), y2: y(high), class: "grid" }),
    svg("path", { d: area, class: "area" }),
    svg("path", { d: line, class: "line" }),
    svg("text", { x: left - 8, y: y(high) + 4, "text-anchor": "end" }, money ? dollars(high) : count(high)),
    svg("text", { x: left - 8, y: y(0) + 4, "text-anchor": "end" }, money ? "$0" : "0"),
    svg("text", { x: left, y: height - 8 }, clock(start)),
    svg("text", { x: width - right, y: height - 8, "text-anchor": "end" }, clock(end)),
  );
  const last = points[points.length - 1];
  picture.append(svg("circle", { cx: x(last.at), cy: y(value(last)), r: 4, class: "dot" }));
  container.append(picture);
}

// --- the page -------------------------------------------------------------------------------

function render() {
  const snapshot = state.snapshot;
  const onRun = currentRun() !== null;
  document.getElementById("fleet").hidden = onRun;
  document.getElementById("run").hidden = !onRun;
  if (!snapshot) return;
  setText(document.getElementById("ledger"), snapshot.ledger);
  renderBanner();
  const waiting = snapshot.pending.length;
  setText(document.getElementById("totals"), `${count(liveTotal(snapshot))} live${waiting ? ` · ${waiting} waiting` : ""}`);
  if (onRun) loadRun();
  else renderFleet(snapshot);
}

function liveTotal(snapshot) {
  return Math.max(snapshot.live_total ?? 0, snapshot.live.length);
}

// The ledger's state, said in the banner and the pill: unreachable (red), not answering for a
// while (its reads hang: the page's data grows old), or fine.
function renderBanner() {
  const snapshot = state.snapshot;
  const banner = document.getElementById("banner");
  const pill = document.getElementById("connection");
  const flashing = Date.now() < state.flashUntil;
  const age = state.readAt === null ? Infinity : now() - state.readAt;
  const since = state.readAt ? ` Showing what it said at ${clock(state.readAt)}.` : "";
  if (state.serverDown) {
    if (!flashing && age > Math.max(STALE_READ_FLOOR, STALE_READS * state.interval)) {
      banner.hidden = false;
      banner.className = "banner error";
      setText(banner, `The dashboard server is not answering: what this page shows is stale.${since} Reconnecting.`);
    }
    pill.className = "pill down";
    setText(pill, "dashboard server unreachable");
  } else if (!snapshot.ok) {
    if (!flashing) {
      banner.hidden = false;
      banner.className = "banner error";
      setText(banner, `The ledger ${snapshot.ledger} is unreachable: ${snapshot.error}.${since} Trying again every moment.`);
    }
    pill.className = "pill down";
    setText(pill, "ledger unreachable");
  } else if (age > Math.max(STALE_READ_FLOOR, STALE_READS * state.interval)) {
    if (!flashing) {
      banner.hidden = false;
      banner.className = "banner warn";
      setText(banner, `The ledger ${snapshot.ledger} has not answered for ${duration(age)} (it may be locked ` +
        `by another process, or slow): what this page shows is stale.${since} Still waiting for it.`);
    }
    pill.className = "pill warn";
    setText(pill, "ledger not answering");
  } else {
    if (!flashing) banner.hidden = true;
    pill.className = "pill ok";
    setText(pill, "live");
  }
}

function tick() {
  if (!state.snapshot) return;
  renderBanner();
  for (const row of document.querySelectorAll("#live tbody tr")) refreshTimes(row);
  for (const node of document.querySelectorAll(".resets")) {
    if (node.dataset.resets) setText(node, resets(Number(node.dataset.resets)));
  }
}

function receive(news) {
  state.offset = news.now - Date.now() / 1000;
  state.readAt = news.read_at;
  if (news.interval) state.interval = news.interval;
  state.snapshot = news.state;
  render();
}

// Between snapshots: the time, and when the ledger last answered.
function receiveRead(news) {
  state.offset = news.now - Date.now() / 1000;
  state.readAt = news.read_at;
  if (state.snapshot) renderBanner();
}

function connect() {
  const pill = document.getElementById("connection");
  const source = new EventSource(`/api/events?token=${encodeURIComponent(state.token)}`);
  source.addEventListener("state", (message) => receive(JSON.parse(message.data)));
  source.addEventListener("read", (message) => receiveRead(JSON.parse(message.data)));
  source.addEventListener("open", () => (state.serverDown = false));
  source.addEventListener("error", () => {
    state.serverDown = true;
    pill.className = "pill down";
    setText(pill, "dashboard server unreachable");
  });
}

async function start() {
  state.token = takeToken();
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-nav]");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    history.pushState(null, "", link.getAttribute("href"));
    document.getElementById("run-timeline").replaceChildren();
    const stop = document.getElementById("run-stop");
    stop.disabled = false;
    stop.textContent = "Stop";
    render();
  });
  window.addEventListener("popstate", render);
  document.getElementById("live-all").addEventListener("click", () => {
    state.allLive = !state.allLive;
    render();
  });
  document.getElementById("run-stop").addEventListener("click", (event) => stopRun(currentRun(), event.target));
  const check = await fetch("/api/state", { headers: { "X-Haltwise-Token": state.token } });
  if (check.status === 403) {
    const banner = document.getElementById("banner");
    banner.hidden = false;
    banner.className = "banner error";
    banner.textContent = "This page needs its token: open the URL that haltwise dashboard printed (it ends with #token=…).";
    setText(document.getElementById("connection"), "no token");
    return;
  }
  if (check.ok) receive(await check.json());  // the fleet at once; then each change
  else render();
  connect();
  setInterval(tick, 1000);
}

start();
