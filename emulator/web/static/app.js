// The page: draws the fabric the server sends, colours its links by every
// sample (live from /events, or a replay from /api/replay), lists the calls.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const SX = 130, SY = 210, PAD = 50;      // layout units to pixels (plots.layout's positions)
const OFFSET = 4;                       // a switch link's two directions, side by side
const MAX_LABELLED = 48;                // switch links with a value printed on them; more: tooltips only
const SHOWN_BUSIEST = 8;                // as the terminal's live view
// matplotlib's plasma, as fabric.png colours links
const PLASMA = ["#0d0887", "#46039f", "#7201a8", "#9c179e", "#bd3786", "#d8576b", "#ed7953", "#fb9f3a",
  "#fdca26", "#f0f921"];
const IDLE = "#bbbbbb";

const state = { fabric: null, directed: {}, live: true, frames: [], pos: 0, timer: null, calls: 0 };
const $ = (id) => document.getElementById(id);

function colour(util) {
  if (util === undefined || util === null) return IDLE;
  const i = Math.max(0, Math.min(PLASMA.length - 1, Math.round(util * (PLASMA.length - 1))));
  return PLASMA[i];
}

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

// --- the drawing -------------------------------------------------------------------------

function drawFabric(msg) {
  state.fabric = msg;
  state.directed = {};
  $("topology").textContent = msg.topology;
  const svg = $("fabric");
  svg.replaceChildren();
  const boxed = (msg.boxes || []).flatMap((b) => [[b.x, b.y], [b.x + b.width, b.y + b.height]]);   // nodes of accelerators
  const xs = msg.nodes.map((n) => n.x).concat(boxed.map(([x]) => x));
  const ys = msg.nodes.map((n) => n.y).concat(boxed.map(([, y]) => y));
  const minX = Math.min(...xs), maxY = Math.max(...ys);
  const at = {};
  for (const n of msg.nodes) at[n.name] = [(n.x - minX) * SX + PAD, (maxY - n.y) * SY + PAD];
  const width = (Math.max(...xs) - minX) * SX + 2 * PAD, height = (maxY - Math.min(...ys)) * SY + 2 * PAD;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const boxes = el("g", { id: "boxes" }, svg);   // nodes of accelerators, behind everything
  for (const b of msg.boxes || []) {
    el("rect", { class: "accelerator-node", x: (b.x - minX) * SX + PAD, y: (maxY - b.y - b.height) * SY + PAD,
                 width: b.width * SX, height: b.height * SY }, boxes);
  }
  const links = el("g", { id: "links" }, svg), nodes = el("g", { id: "nodes" }, svg);
  const labelled = msg.links.filter((l) => l.kind === "switch").length <= MAX_LABELLED;
  for (const link of msg.links) drawLink(links, link, at, labelled);
  for (const n of msg.nodes) drawNode(nodes, n, at[n.name]);
  $("busiest").tBodies[0].replaceChildren();
}

function drawLink(parent, link, at, labelled) {
  const g = el("g", { class: `link ${link.kind}-link`, "data-a": link.a, "data-b": link.b }, parent);
  const [ax, ay] = at[link.a], [bx, by] = at[link.b];
  if (link.kind !== "switch") {   // a host link: one thin line, coloured by its busier direction
    const line = el("line", { class: "hostlink", x1: ax, y1: ay, x2: bx, y2: by, stroke: IDLE }, g);
    for (const d of link.directions) state.directed[d] = { line, host: true, link };
    return;
  }
  const len = Math.hypot(bx - ax, by - ay) || 1, nx = -(by - ay) / len * OFFSET, ny = (bx - ax) / len * OFFSET;
  link.directions.forEach((label, i) => {   // i = 0: a to b, drawn on one side; i = 1: b to a, on the other
    const [sx, sy, ex, ey] = i === 0 ? [ax, ay, bx, by] : [bx, by, ax, ay];
    const side = i === 0 ? 1 : -1;
    const line = el("line", { class: "dir", "data-link": label, stroke: IDLE,
      x1: sx + side * nx, y1: sy + side * ny, x2: ex + side * nx, y2: ey + side * ny }, g);
    const title = el("title", {}, line);
    title.textContent = label;
    let text = null;
    if (labelled) {   // near the sending end, where its queue is
      text = el("text", { class: "value", x: sx + (ex - sx) * 0.25 + side * nx * 4, y: sy + (ey - sy) * 0.25 + side * ny * 4 }, g);
    }
    state.directed[label] = { line, title, text, link };
  });
}

function drawNode(parent, n, [x, y]) {
  const g = el("g", { class: `node ${n.kind}`, "data-node": n.name }, parent);
  if (n.kind === "switch") {
    el("rect", { x: x - 24, y: y - 12, width: 48, height: 24 }, g);
    el("text", { x, y }, g).textContent = n.name;
  } else {
    el("circle", { cx: x, cy: y, r: 5 }, g);
    el("text", { x, y: y + (isTop(n) ? -9 : 16) }, g).textContent = n.name;
  }
}

function isTop(n) {   // hosts above their switch (BiGraph's upper part) get their name above
  const ys = state.fabric.nodes.filter((m) => m.kind === "switch").map((m) => m.y);
  return n.y > Math.max(...ys);
}

function kB(bytes) { return bytes >= 1000 ? `${Math.round(bytes / 1000)} kB` : `${bytes} B`; }

// values: {label: [util, backlog bytes, drops]}
function showLinks(values) {
  const hostUse = new Map();
  for (const [label, d] of Object.entries(state.directed)) {
    const v = values[label];
    if (d.host) {
      const prev = hostUse.get(d.line);
      if (v && (prev === undefined || v[0] > prev)) hostUse.set(d.line, v[0]);
      else if (!hostUse.has(d.line)) hostUse.set(d.line, undefined);
      continue;
    }
    d.line.setAttribute("stroke", colour(v && v[0]));
    d.line.setAttribute("data-util", v ? v[0] : "");
    d.line.setAttribute("data-backlog", v ? v[1] : "");
    d.title.textContent = v ? `${label}: ${pct(v[0])}, queue ${kB(v[1])}, drops ${v[2]}` : `${label}: no sample`;
    if (d.text) d.text.textContent = v ? pct(v[0]) + (v[1] ? ` ${kB(v[1])}` : "") : "";
  }
  for (const [line, util] of hostUse) line.setAttribute("stroke", colour(util));
  showBusiest(values);
}

function pct(util) { return `${Math.round(util * 100)}%`; }

function showBusiest(values) {
  const rows = Object.entries(values).filter(([l]) => state.directed[l] && !state.directed[l].host)
    .sort((a, b) => b[1][0] - a[1][0] || (a[0] < b[0] ? -1 : 1)).slice(0, SHOWN_BUSIEST);
  $("busiest").tBodies[0].replaceChildren(...rows.map(([label, [util, backlog, drops]]) => {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td></td><td class="bar"><div></div></td><td>${pct(util)}</td><td>${backlog ? kB(backlog) : ""}` +
      `${drops ? ` drops ${drops}` : ""}</td>`;
    tr.cells[0].textContent = label;
    tr.querySelector(".bar div").style.width = `${Math.min(100, util * 100)}%`;
    return tr;
  }));
}

function showRanks(ranks) {
  $("ranks").replaceChildren(...ranks.map((r) => {
    const div = document.createElement("div");
    div.className = "rank";
    // a program's rank (exec) has a state; an agent's, steps done of its schedule
    const what = r.state ? r.state : r.job ? `${r.job}: ${r.op}` : `step ${r.done}/${r.total}`;
    const share = r.state ? (r.state.startsWith("exited") ? 1 : 0) : r.total ? r.done / r.total : 0;
    div.innerHTML = `<span></span><span class="bar"><div></div></span><span></span>`;
    div.children[0].textContent = `rank ${r.rank} ${r.host}`;
    div.children[1].firstChild.style.width = `${100 * share}%`;
    if (r.state && r.state.startsWith("exited") && r.state !== "exited 0") div.classList.add("fail");
    div.children[2].textContent = what;
    return div;
  }));
}

// --- messages ----------------------------------------------------------------------------

function onMessage(msg) {
  if (msg.type === "fabric") drawFabric(msg);
  else if (msg.type === "sample") {
    $("status").textContent = `${msg.label}  t=${msg.t_s.toFixed(1)} s`;
    if (state.live && state.fabric) showLinks(msg.links);
    showRanks(msg.ranks);
  } else if (msg.type === "call") addCall(msg);
  else if (msg.type === "end") showEnd(msg);
}

function addCall(msg) {
  state.calls += 1;
  const tr = document.createElement("tr");
  tr.innerHTML = "<td></td><td></td><td></td><td></td><td></td><td></td>";
  [state.calls, msg.label, msg.measured, msg.model, msg.verdict].forEach((v, i) => { tr.cells[i].textContent = v; });
  tr.cells[4].className = msg.verdict === "ok" ? "ok" : msg.verdict.startsWith("FAIL") ? "fail" : "";
  if (msg.call !== null && msg.call !== undefined) {
    const b = document.createElement("button");
    b.textContent = "replay";
    b.onclick = () => { loadCalls().then(() => startReplay(msg.run, msg.call)); };
    tr.cells[5].appendChild(b);
  }
  $("calls").tBodies[0].appendChild(tr);
  loadCalls();
}

function showEnd(msg) {
  $("end").hidden = false;
  $("story").textContent = msg.story || "(the run has finished)";
  $("plots").replaceChildren(...msg.plots.map((name) => {
    const a = document.createElement("a");
    a.href = `/results/${encodeURIComponent(name)}`;
    a.target = "_blank";
    a.textContent = name;
    return a;
  }));
  $("status").textContent = "finished";
}

// --- replay ------------------------------------------------------------------------------

async function loadCalls() {
  const res = await fetch("/api/replay");
  if (!res.ok) return;
  const { calls } = await res.json();
  const select = $("replay-call"), chosen = select.value;
  select.replaceChildren(...calls.map((c) => new Option(c.label, `${c.run}/${c.call}`)));
  if (chosen && calls.some((c) => `${c.run}/${c.call}` === chosen)) select.value = chosen;
}

async function startReplay(run, call) {
  pause();
  $("replay-call").value = `${run}/${call}`;
  const res = await fetch(`/api/replay?run=${run}&call=${call}`);
  if (!res.ok) { $("replay-info").textContent = (await res.json()).error; return; }
  state.frames = (await res.json()).frames;
  state.live = false;
  state.loaded = `${run}/${call}`;
  $("replay-pos").max = String(state.frames.length - 1);
  show(0);
}

function show(i) {
  if (!state.frames.length) return;
  state.pos = Math.max(0, Math.min(state.frames.length - 1, i));
  const f = state.frames[state.pos];
  showLinks(f.links);
  $("replay-pos").value = String(state.pos);
  $("replay-info").textContent = `replay: sample ${state.pos + 1}/${state.frames.length}, t=${f.t_s.toFixed(2)} s`;
}

function play() {
  if (!state.frames.length) return;
  if (state.pos >= state.frames.length - 1) show(0);
  $("replay-play").textContent = "pause";
  const tick = () => {
    if (state.pos >= state.frames.length - 1) { pause(); return; }
    const dt = state.frames[state.pos + 1].t_s - state.frames[state.pos].t_s;
    state.timer = setTimeout(() => { show(state.pos + 1); tick(); }, 1000 * dt / Number($("replay-speed").value));
  };
  tick();
}

function pause() {
  clearTimeout(state.timer);
  state.timer = null;
  $("replay-play").textContent = "play";
}

function chosenCall() {
  const [run, call] = $("replay-call").value.split("/").map(Number);
  return { run, call };
}

async function ensureLoaded() {   // the buttons load the chosen call first
  const { run, call } = chosenCall();
  if (Number.isNaN(call)) return false;
  if (state.live || state.loaded !== `${run}/${call}`) await startReplay(run, call);
  return state.frames.length > 0;
}

$("replay-play").onclick = async () => {
  if (state.timer) { pause(); return; }
  if (await ensureLoaded()) play();
};
$("replay-step").onclick = async () => { pause(); if (await ensureLoaded()) show(state.pos + 1); };
$("replay-back").onclick = async () => { pause(); if (await ensureLoaded()) show(state.pos - 1); };
$("replay-pos").oninput = () => { pause(); show(Number($("replay-pos").value)); };
$("replay-call").onchange = () => { const { run, call } = chosenCall(); startReplay(run, call); };
$("replay-live").onclick = () => { pause(); state.live = true; state.loaded = null; $("replay-info").textContent = "live"; };

const events = new EventSource("/events");
events.onmessage = (e) => onMessage(JSON.parse(e.data));
events.onopen = () => {   // the server sends what it kept again: the table starts afresh
  $("connection").textContent = "";
  state.calls = 0;
  $("calls").tBodies[0].replaceChildren();
};
events.onerror = () => { $("connection").textContent = "server not reachable (the run may have ended)"; };
loadCalls();
