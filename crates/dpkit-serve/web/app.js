// dpkit's analyst page. Every value from the server goes into the page as
// text (textContent), never as markup: group keys come from the data.
"use strict";

const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem("dpkit-key") || "";
let datasets = [];

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function status(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "status error" : "status";
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: Object.assign({ Authorization: "Bearer " + key },
      body ? { "Content-Type": "application/json" } : {}),
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await response.json();
  if (!response.ok) throw new Error(json.error ? json.error.message : "HTTP " + response.status);
  return json;
}

function round(x, digits) {
  // An unbounded interval end comes as the largest double.
  if (Math.abs(x) >= Number.MAX_VALUE) return x > 0 ? "inf" : "-inf";
  if (!Number.isFinite(x)) return String(x);
  return Math.abs(x) >= 1e6 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(3) : String(Number(x.toFixed(digits)));
}

function showBudget(budget) {
  // The concentrated accountant (zCDP) pays for queries past plain sums.
  const c = budget.concentrated;
  $("budget").textContent = budget.dataset + ": ε left " + round(budget.remaining_epsilon, 3) +
    " of " + round(budget.total_epsilon, 3) + " · δ left " + budget.remaining_delta.toExponential(1) +
    " · " + budget.queries + " queries" +
    (c ? " · zCDP: ρ " + (c.spent_rho ? c.spent_rho.toPrecision(3) : "0") + " of " +
      c.total_rho.toPrecision(3) : "") +
    (c && c.spent_threshold_delta ? " · thresholds δ " + c.spent_threshold_delta.toExponential(2) +
      " of " + c.threshold_delta.toExponential(2) : "");
}

async function refreshBudget() {
  const all = await api("GET", "/v1/budget");
  const mine = all.budgets.find((b) => b.dataset === $("dataset").value);
  if (mine) showBudget(mine);
}

function showSchema() {
  const dataset = datasets.find((d) => d.name === $("dataset").value);
  const body = $("schema").tBodies[0];
  body.replaceChildren();
  if (!dataset) return;
  $("people").textContent = (dataset.people ? dataset.people + " people · " : "") +
    "one person adds at most " + dataset.rows_per_person + " row(s)" +
    (dataset.private_tables.length ? " · private tables joined on the person: " +
      dataset.private_tables.map((t) => t.name + " (" + t.person_column + ", at most " +
        t.rows_per_person + " row(s))").join(", ") : "") +
    (dataset.public_tables.length ? " · public tables to join: " +
      dataset.public_tables.join(", ") : "");
  const columns = dataset.columns.concat(...dataset.private_tables.map((t) =>
    t.columns.map((c) => Object.assign({}, c, { name: t.name + "." + c.name }))));
  for (const column of columns) {
    const row = element("tr");
    row.append(element("td", column.name), element("td", column.type),
      element("td", column.bounds ? "[" + column.bounds[0] + ", " + column.bounds[1] + "]" : ""),
      element("td", column.domain ? column.domain.join(", ") : "", "values"));
    body.append(row);
  }
}

async function connect() {
  key = $("key").value.trim();
  sessionStorage.setItem("dpkit-key", key);
  try {
    datasets = (await api("GET", "/v1/datasets")).datasets;
    const select = $("dataset");
    select.replaceChildren(...datasets.map((d) => element("option", d.name)));
    select.disabled = datasets.length === 0;
    $("explain-button").disabled = $("run-button").disabled = datasets.length === 0;
    showSchema();
    await refreshBudget();
    status(datasets.length ? "connected" : "no dataset is granted to this key", datasets.length === 0);
  } catch (error) {
    status(error.message, true);
  }
}

function request() {
  return {
    dataset: $("dataset").value,
    sql: $("sql").value,
    epsilon: Number($("epsilon").value),
    delta: Number($("delta").value),
    mechanism: $("mechanism").value,
    confidence: Number($("confidence").value),
  };
}

// Said when a request waited for a free worker: other analysts' queries,
// or this analyst's own beyond its share, were running.
function waited(answer) {
  const seconds = answer.waited_seconds || 0;
  return seconds >= 0.1 ? " (after " + round(seconds, 1) + " s in the queue for a free worker)" : "";
}

async function explain() {
  try {
    const answer = await api("POST", "/v1/explain", request());
    $("explanation").hidden = false;
    $("explanation").textContent = "Costs ε = " + answer.epsilon + ", δ = " + answer.delta +
      " (nothing spent); the budget can pay for " + answer.queries_left + " more like it\n\n" +
      answer.explanation;
    showBudget(answer.budget);
    status("explained: nothing spent" + waited(answer));
  } catch (error) {
    status(error.message, true);
  }
}

async function run() {
  $("run-button").disabled = true;
  try {
    const answer = await api("POST", "/v1/query", request());
    showAnswer(answer);
    showBudget(answer.budget);
    status((answer.replay ? "the same request again: its first answer, free" : "answered") +
      waited(answer));
  } catch (error) {
    status(error.message, true);
    await refreshBudget().catch(() => {});
  } finally {
    $("run-button").disabled = false;
  }
}

function showAnswer(answer) {
  $("answer-section").hidden = false;
  $("replay").hidden = !answer.replay;
  $("answer-cost").textContent = Math.round(answer.confidence * 100) + "% intervals · ε = " +
    answer.epsilon + ", δ = " + answer.delta + (answer.replay ? " (paid before)" : "");
  const notes = answer.notes || [];
  $("answer-notes").replaceChildren(...notes.map((note) => element("li", note)));
  $("answer-notes").hidden = notes.length === 0;
  const head = element("tr");
  answer.columns.forEach((c) => head.append(element("th", c)));
  $("answer").tHead.replaceChildren(head);
  const body = $("answer").tBodies[0];
  body.replaceChildren();
  for (const row of answer.rows) {
    const tr = element("tr");
    for (const cell of row) {
      if (typeof cell === "string") { tr.append(element("td", cell)); continue; }
      const td = element("td", round(cell.value, 2) + " ");
      td.append(element("span", "[" + round(cell.low, 2) + ", " + round(cell.high, 2) + "]", "interval"));
      tr.append(td);
    }
    body.append(tr);
  }
  drawChart(answer);
}

// Bars with interval whiskers for the first released column, one per group.
function drawChart(answer) {
  const chart = $("chart");
  chart.replaceChildren();
  const first = answer.rows.length ? answer.rows[0].findIndex((c) => typeof c !== "string") : -1;
  if (first < 0) return;
  const label = (row) => row.filter((c) => typeof c === "string").join(" · ") || "all";
  const points = answer.rows.map((row) => ({ label: label(row), cell: row[first] }));
  const ns = "http://www.w3.org/2000/svg";
  const width = 640, rowHeight = 26, left = 170, right = 20, top = 24;
  const height = top + points.length * rowHeight + 10;
  // An unbounded end (a ratio whose divisor may be 0) comes as the largest
  // double: the scale is set by the finite ends, and it is drawn to the edge.
  const finite = (v) => Math.abs(v) < Number.MAX_VALUE;
  const ends = points.flatMap((p) => [p.cell.low, p.cell.high, p.cell.value]).filter(finite);
  const low = Math.min(0, ...ends);
  const high = Math.max(0, ...ends);
  const x = (v) => left + ((Math.min(high, Math.max(low, v)) - low) / ((high - low) || 1)) *
    (width - left - right);
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.setAttribute("width", width);
  svg.setAttribute("role", "img");
  const add = (tag, attributes, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  add("text", { x: left, y: 14 }, answer.columns[first] + " with " +
    Math.round(answer.confidence * 100) + "% intervals");
  points.forEach((p, i) => {
    const y = top + i * rowHeight;
    const value = p.cell.value;
    add("text", { x: left - 8, y: y + 15, "text-anchor": "end" }, p.label.slice(0, 26));
    add("rect", { class: "bar", x: Math.min(x(0), x(value)), y: y + 4,
      width: Math.max(1, Math.abs(x(value) - x(0))), height: rowHeight - 10 });
    add("line", { class: "whisker", x1: x(p.cell.low), x2: x(p.cell.high), y1: y + 11, y2: y + 11 });
    add("line", { class: "whisker", x1: x(p.cell.low), x2: x(p.cell.low), y1: y + 6, y2: y + 16 });
    add("line", { class: "whisker", x1: x(p.cell.high), x2: x(p.cell.high), y1: y + 6, y2: y + 16 });
  });
  chart.append(svg);
}

document.addEventListener("DOMContentLoaded", () => {
  $("key").value = key;
  $("connect-button").addEventListener("click", connect);
  $("dataset").addEventListener("change", () => { showSchema(); refreshBudget().catch(() => {}); });
  $("explain-button").addEventListener("click", explain);
  $("run-button").addEventListener("click", run);
  if (key) connect();
});
