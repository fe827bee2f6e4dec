// c4fast web board: talks to the JSON API of selfplay.apps.web (docs/WEB.md); same-origin JSON POSTs only.
// Row 0 is the bottom; player 1 (red) moves first; columns are 0-based.
"use strict";

const CELL = 54, PAD = 10, LEFT = 52, OV_H = 96, COORD_H = 22, SOLVER_H = 28;
const SIZES = [];
for (let h = 9; h <= 12; h++) for (let w = 9; w <= 12; w++) SIZES.push(`${h}x${w}`);

const $ = (id) => document.getElementById(id);
let state = null;      // the server's state of the current game
let analysis = null;   // the server's analysis of state (same ply) or null
let pending = null;    // the column of a move on its way to the server
let busy = false;      // a move, undo or new game is in flight
let analyseSeq = 0;    // ignores out-of-date analysis answers

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
  const r = await fetch(path, opts);
  let data;
  try { data = await r.json(); } catch (e) { data = {error: `HTTP ${r.status}`}; }
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

function showError(msg) {
  const e = $("error");
  e.textContent = msg || "";
  e.hidden = !msg;
}

function setBusy(b) {
  busy = b;
  document.body.dataset.busy = b ? "1" : "0";
  $("thinking").hidden = !b;
  $("new-game").disabled = b;
  $("undo").disabled = b || !state || !canUndo();
}

function canUndo() {
  return state.moves.some((_, i) => (i % 2) + 1 === state.human);
}

// ------------------------------------------------------------------------------ drawing
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
const pct = (x) => `${Math.round(100 * x)}%`;

function geometry() {
  const overlay = $("analysis-toggle").checked;
  const top = overlay ? OV_H : 6;
  const H = state.height, W = state.width;
  const solver = overlay && analysis && analysis.solver;
  return {
    H, W, top,
    x: (c) => LEFT + PAD + c * CELL + CELL / 2,
    y: (r) => top + PAD + (H - 1 - r) * CELL + CELL / 2,
    boardW: W * CELL + 2 * PAD, boardH: H * CELL + 2 * PAD,
    width: LEFT + W * CELL + 2 * PAD + 12,
    height: top + H * CELL + 2 * PAD + COORD_H + (solver ? SOLVER_H : 0) + 4,
  };
}

function render() {
  const svg = $("board");
  if (!state) { svg.setAttribute("width", 0); svg.setAttribute("height", 0); return; }
  const g = geometry();
  const parts = [];
  const R = CELL * 0.4;
  parts.push(`<rect x="${LEFT}" y="${g.top}" width="${g.boardW}" height="${g.boardH}" rx="14" fill="var(--frame)"/>`);
  const board = state.board.map((row) => row.slice());
  if (pending !== null) {
    const r = board.findIndex((row) => row[pending] === 0);
    if (r >= 0) board[r][pending] = state.to_move;
  }
  for (let r = 0; r < g.H; r++) {
    for (let c = 0; c < g.W; c++) {
      const v = board[r][c], cx = g.x(c), cy = g.y(r);
      if (v === -1) {
        const d = R * 0.55;
        parts.push(`<circle class="forbidden-cell" data-forbidden="1" data-row="${r}" data-col="${c}" cx="${cx}" cy="${cy}" r="${R}"/>` +
          `<path class="forbidden-mark" d="M${cx - d},${cy - d}L${cx + d},${cy + d}M${cx + d},${cy - d}L${cx - d},${cy + d}"/>`);
      } else if (v === 0) {
        parts.push(`<circle class="hole" cx="${cx}" cy="${cy}" r="${R}"/>`);
      } else {
        parts.push(`<circle class="stone p${v}" data-row="${r}" data-col="${c}" data-player="${v}" cx="${cx}" cy="${cy}" r="${R}"/>`);
      }
    }
  }
  if (state.moves.length && pending === null) {  // ring on the last stone
    const c = state.moves[state.moves.length - 1];
    let r = g.H - 1;
    while (r >= 0 && board[r][c] <= 0) r--;
    if (r >= 0) parts.push(`<circle class="last" cx="${g.x(c)}" cy="${g.y(r)}" r="${R * 0.55}"/>`);
  }
  for (const [r, c] of state.win_line || []) {
    parts.push(`<circle class="win" cx="${g.x(c)}" cy="${g.y(r)}" r="${R + 2}"/>`);
  }
  if ($("analysis-toggle").checked && analysis) parts.push(overlay(g));
  for (let c = 0; c < g.W; c++) {
    parts.push(`<text class="coord" x="${g.x(c)}" y="${g.top + g.boardH + 15}">${c}</text>`);
    parts.push(`<rect class="col-hit" data-col="${c}" x="${g.x(c) - CELL / 2}" y="${g.top}" width="${CELL}" height="${g.boardH}"/>`);
  }
  svg.setAttribute("width", g.width);
  svg.setAttribute("height", g.height);
  svg.setAttribute("viewBox", `0 0 ${g.width} ${g.height}`);
  svg.innerHTML = parts.join("");
}

function overlay(g) {
  const a = analysis, out = [`<g id="overlay" data-ply="${a.ply}">`];
  const R = CELL * 0.4;
  const pol = a.policy || [], vis = a.visits || [], val = a.values || [];
  const maxP = Math.max(1e-9, ...pol.filter((p) => p !== null));
  const barTop = 18, barH = 42, base = barTop + barH;
  out.push(`<text class="ov-head" x="${LEFT - 6}" y="${base - 4}">policy</text>`);
  out.push(`<text class="ov-head" x="${LEFT - 6}" y="${base + 15}">visits</text>`);
  out.push(`<text class="ov-head" x="${LEFT - 6}" y="${base + 30}">value</text>`);
  for (let c = 0; c < g.W; c++) {
    const x = g.x(c);
    if (pol[c] !== undefined && pol[c] !== null) {
      const h = Math.max(1, barH * pol[c] / maxP);
      out.push(`<rect class="policy-bar${c === a.best ? " best" : ""}" data-col="${c}" x="${x - 12}" y="${base - h}" width="24" height="${h}" rx="3"/>`);
      out.push(`<text class="ov-text" x="${x}" y="${base - h - 4}">${pct(pol[c])}</text>`);
    }
    if (vis[c] !== undefined && vis[c] !== null) {
      out.push(`<text class="ov-text visits" data-col="${c}" x="${x}" y="${base + 15}">${vis[c]}</text>`);
    }
    if (val[c] !== undefined && val[c] !== null) {
      out.push(`<text class="ov-text value" data-col="${c}" x="${x}" y="${base + 30}">${pct(val[c])}</text>`);
    }
  }
  (a.pv_cells || []).forEach(([r, c], i) => {
    const p = ((a.ply + i) % 2) + 1;
    out.push(`<circle class="stone pv-stone p${p}" data-pv="${i + 1}" cx="${g.x(c)}" cy="${g.y(r)}" r="${R}"/>` +
      `<circle class="pv-ring" cx="${g.x(c)}" cy="${g.y(r)}" r="${R}"/>` +
      `<text class="pv-label" x="${g.x(c)}" y="${g.y(r)}">${i + 1}</text>`);
  });
  if (a.solver) {
    const y0 = g.top + g.boardH + COORD_H;
    out.push(`<text class="ov-head" x="${LEFT - 6}" y="${y0 + 16}">solver</text>`);
    a.solver.forEach((s, c) => {
      if (!s) return;
      const label = s.verdict === "draw" ? "D" : `${s.verdict === "win" ? "W" : "L"}${Math.abs(s.score)}`;
      out.push(`<rect class="solver-cell solver-${s.verdict}" data-col="${c}" x="${g.x(c) - 20}" y="${y0 + 3}" width="40" height="20" rx="5"/>` +
        `<text class="solver-text" x="${g.x(c)}" y="${y0 + 13}">${label}</text>`);
    });
  }
  out.push("</g>");
  return out.join("");
}

function renderSide() {
  const status = $("status");
  if (!state) return;
  document.body.dataset.ply = String(state.moves.length);
  document.body.dataset.result = state.result === null ? "" : String(state.result);
  document.body.dataset.game = state.game;
  const colour = (p) => `<span class="dot" style="background:var(--p${p})"></span>${p === 1 ? "red" : "yellow"}`;
  const board = `${state.height}x${state.width}` + (state.forbidden ? `, forbidden cell row ${state.forbidden[0]} col ${state.forbidden[1]}` : "");
  if (state.result === null) {
    status.innerHTML = busy ? `Engine (${colour(3 - state.human)}) is thinking…`
      : `Your move as ${colour(state.human)} — click a column. <small>${esc(board)} · ${esc(state.engine)}</small>`;
  } else if (state.result === 0) {
    status.innerHTML = "Game over: a draw.";
  } else {
    status.innerHTML = state.result === state.human ? `Game over: you win as ${colour(state.human)}!`
      : `Game over: the engine (${colour(state.result)}) wins.`;
  }
  $("moves").innerHTML = state.saiblo.map((s, i) =>
    `<li class="p${(i % 2) + 1}" title="column ${state.moves[i]}"><span class="n">${i + 1}.</span><span class="s">${s}</span></li>`).join("");
  $("moves").scrollTop = 1e6;
  $("replay").value = state.replay;
  $("undo").disabled = busy || !canUndo();
  renderAnalysisPanel();
}

function renderAnalysisPanel() {
  const on = $("analysis-toggle").checked && state;
  $("analysis").hidden = !on;
  if (!on) return;
  const a = analysis;
  if (state.result !== null) {
    $("wdl").innerHTML = "";
    $("analysis-info").innerHTML = `<span class="muted">The game is over.</span>`;
    return;
  }
  if (!a) {
    $("wdl").innerHTML = "";
    $("analysis-info").innerHTML = `<span class="muted">analysing…</span>`;
    return;
  }
  $("analysis-engine").textContent = a.engine;
  if (a.wdl) {
    const [w, d, l] = a.wdl;
    const seg = (cls, name, x) => `<div class="${cls}" style="flex:${x}" title="${name} ${pct(x)}">` +
      `${x > .2 ? name + " " + pct(x) : x > .09 ? pct(x) : ""}</div>`;
    $("wdl").innerHTML = seg("w", "win", w) + seg("d", "draw", d) + seg("l", "loss", l);
  } else {
    $("wdl").innerHTML = "";
  }
  const mover = a.to_move === 1 ? "red" : "yellow";
  const lines = [`For ${mover} (to move). Best column <b>${a.best}</b>; line ${a.pv.join(" ")}.`];
  if (a.raw_wdl) lines.push(`Network's raw value: win ${pct(a.raw_wdl[0])}, draw ${pct(a.raw_wdl[1])}, loss ${pct(a.raw_wdl[2])}.`);
  if (a.values_from) lines.push(`<span class="muted">value = expected score after each column (${esc(a.values_from)})${a.partial ? ", time budget reached" : ""}.</span>`);
  if (!a.policy) lines.push(`<span class="muted">No policy: not a network engine.</span>`);
  if (a.solver) lines.push(`<span class="muted">solver: exact result of each column, W/L with Pons's score (larger = faster).</span>`);
  else if (a.solver_note) lines.push(`<span class="muted">solver: ${esc(a.solver_note)}.</span>`);
  $("analysis-info").innerHTML = lines.join("<br>");
}

function update(newState) {
  if (!state || newState.game !== state.game || newState.moves.length !== state.moves.length) analysis = null;
  state = newState;
  pending = null;
  localStorage.setItem("c4fast-game", state.game);
  render();
  renderSide();
  requestAnalysis();
}

// ------------------------------------------------------------------------------ actions
async function requestAnalysis() {
  if (!$("analysis-toggle").checked || !state || state.result !== null || analysis || busy) return;
  const seq = ++analyseSeq, ply = state.moves.length, gid = state.game;
  try {
    const a = await api("/api/analyse", {game: gid});
    if (seq !== analyseSeq || !state || state.game !== gid || state.moves.length !== ply || a.ply !== ply) return;
    analysis = a;
    render();
    renderAnalysisPanel();
  } catch (e) {
    if (seq === analyseSeq) showError(`analysis: ${e.message}`);
  }
}

async function act(path, body, optimistic) {
  if (busy) return;
  showError("");
  setBusy(true);
  analyseSeq++;
  if (optimistic) optimistic();
  render();
  renderSide();
  try {
    const s = await api(path, body);
    setBusy(false);
    update(s);
  } catch (e) {
    pending = null;
    setBusy(false);
    render();
    renderSide();
    showError(e.message);
    requestAnalysis();
  }
}

function playColumn(col) {
  if (!state || busy) return;
  const optimistic = () => {
    if (state.result === null && state.legal.includes(col)) pending = col;
  };
  act("/api/move", {game: state.game, col, ply: state.moves.length}, optimistic);
}

function newGameBody() {
  const body = {engine: $("engine").value.trim(), human_first: $("first").value === "human"};
  const size = $("size").value;
  if (size !== "random") {
    const [h, w] = size.split("x").map(Number);
    body.height = h;
    body.width = w;
  }
  const mode = $("forbidden-mode").value;
  body.forbidden = mode === "none" ? null : mode === "random" ? "random"
    : [Number($("forbidden-row").value), Number($("forbidden-col").value)];
  if (!body.engine) delete body.engine;
  return body;
}

function setup() {
  const sel = $("size");
  sel.innerHTML = `<option value="random">random Saiblo size</option><option value="6x7">6x7 (standard)</option>` +
    SIZES.map((s) => `<option value="${s}">${s}</option>`).join("");
  sel.addEventListener("change", () => {
    if (sel.value === "6x7") $("forbidden-mode").value = "none";
    else if ($("forbidden-mode").value === "none") $("forbidden-mode").value = "random";
    $("forbidden-cell").hidden = $("forbidden-mode").value !== "chosen";
  });
  $("forbidden-mode").addEventListener("change", () => {
    $("forbidden-cell").hidden = $("forbidden-mode").value !== "chosen";
  });
  $("new-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    act("/api/new", newGameBody());
  });
  $("load-replay").addEventListener("click", () => {
    act("/api/new", {replay: $("replay-input").value.trim(), engine: $("engine").value.trim() || undefined,
                     human_first: $("first").value === "human"});
  });
  $("undo").addEventListener("click", () => state && act("/api/undo", {game: state.game, ply: state.moves.length}));
  $("analysis-toggle").addEventListener("change", () => {
    render();
    renderAnalysisPanel();
    requestAnalysis();
  });
  $("copy-replay").addEventListener("click", () => {
    $("replay").select();
    if (navigator.clipboard) navigator.clipboard.writeText($("replay").value).catch(() => {});
  });
  $("board").addEventListener("click", (ev) => {
    const hit = ev.target.closest(".col-hit");
    if (hit) playColumn(Number(hit.dataset.col));
  });
  setBusy(false);
}

async function start() {
  setup();
  try {
    const h = await api("/api/health");
    $("engine").value = h.default_engine;
    const opt = document.createElement("option");
    opt.value = h.default_engine;
    $("engine-list").prepend(opt);
  } catch (e) {
    showError(`the server does not answer: ${e.message}`);
  }
  const saved = localStorage.getItem("c4fast-game");
  if (saved) {
    try { update(await api(`/api/game/${encodeURIComponent(saved)}`)); } catch (e) { localStorage.removeItem("c4fast-game"); }
  }
  document.body.dataset.ready = "1";
}

start();
