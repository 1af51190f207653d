// The operator console's script: plain JavaScript modules, no build step,
// no dependency. It asks for the admin token once per tab, keeps it in
// sessionStorage, and sends it only in the Authorization header of its own
// requests (http.js): to the admin API (one directory up from the page)
// and to the console's api/overview; each section beside the timers has a
// module of its own (cluster.js, workflows.js, journals.js…).
// Data is put in the page with textContent and DOM nodes only, never as
// HTML, so that a timer's name or payload cannot inject markup.

import { drawChart } from "./chart.js";
import { clearCluster, loadCluster } from "./cluster.js";
import { clearConsumers, loadConsumers } from "./consumers.js";
import { clearViews, loadViews } from "./views.js";
import { clearDeadLetters, loadDeadLetters, watchDeadFilters } from "./deadletters.js";
import { showRecurring, statusBadge } from "./recurring.js";
import { clearWorkflows, loadWorkflows, watchWorkflowFilters } from "./workflows.js";
import { clearJournals, loadJournal, watchJournals } from "./journals.js";
import { absolute, count, relative } from "./format.js";
import { SignedOut, TOKEN_KEY, request } from "./http.js";

const REFRESH_KEY = "trellis.console.refreshMs";
// NOTICE_MS is how long a notice (such as "Deleted timer …") stays.
const NOTICE_MS = 8000;

const $ = (id) => document.getElementById(id);
const adminURL = (path) => new URL("../" + path, document.baseURI);
const consoleURL = (path) => new URL(path, document.baseURI);

const timerURL = (name) => adminURL("timers/" + encodeURIComponent(name));

// ---- what the page holds --------------------------------------------------

const state = {
  // serverOffset is the service's clock minus the browser's, in ms, so
  // that due times read relative to the service's now.
  serverOffset: 0,
  // cursors[i] is the cursor of page i of the current filters.
  cursors: [""],
  page: 0,
  nextCursor: "",
  listKey: "",
  selected: "",
};
const serverNow = () => Date.now() + state.serverOffset;

// ---- sign in and out ------------------------------------------------------

function showLogin(message) {
  clearData();
  $("console-view").hidden = true;
  $("session-tools").hidden = true;
  $("login-view").hidden = false;
  const error = $("login-error");
  error.textContent = message || "";
  error.hidden = !message;
  $("token").focus();
}

function showConsole() {
  $("login-view").hidden = true;
  $("console-view").hidden = false;
  $("session-tools").hidden = false;
}

async function signIn(event) {
  event.preventDefault();
  const input = $("token");
  const candidate = input.value.trim();
  if (!candidate) {
    showLogin("Enter the admin token.");
    return;
  }
  const button = event.submitter || $("login").querySelector("button");
  button.disabled = true;
  try {
    await request("GET", adminURL("timers/stats"), candidate);
  } catch (e) {
    input.value = "";
    showLogin(e.status === 401 ? "That is not the admin token (the server answered 401)." : "Cannot sign in: " + e.message);
    return;
  } finally {
    button.disabled = false;
  }
  input.value = "";
  sessionStorage.setItem(TOKEN_KEY, candidate);
  showConsole();
  refresh();
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearTimeout(refreshTimer);
  showLogin(message);
}

// clearData removes every piece of data the page shows.
function clearData() {
  for (const id of ["stat-active", "stat-due", "stat-failing", "stat-limit", "stat-store"]) {
    setTile(id, "–", "", "");
  }
  $("timers").tBodies[0].replaceChildren();
  $("chart-svg").replaceChildren();
  $("chart-summary").textContent = "";
  $("updated").textContent = "";
  for (const id of ["error", "notice", "list-error", "list-empty"]) $(id).hidden = true;
  closeDetail();
  clearCluster();
  clearConsumers();
  clearViews();
  clearWorkflows();
  clearJournals();
  clearDeadLetters();
  Object.assign(state, { cursors: [""], page: 0, nextCursor: "", listKey: "" });
}

// ---- refresh --------------------------------------------------------------

let refreshTimer = 0;
let refreshing = false;
let refreshAgain = false;

// refresh loads everything the page shows, then schedules the next
// refresh. A refresh asked for while one runs follows it.
async function refresh() {
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  clearTimeout(refreshTimer);
  try {
    do {
      refreshAgain = false;
      await loadAll();
    } while (refreshAgain);
  } finally {
    refreshing = false;
    scheduleRefresh();
  }
}

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  const ms = Number($("refresh").value);
  if (ms > 0 && sessionStorage.getItem(TOKEN_KEY)) refreshTimer = setTimeout(refresh, ms);
}

async function loadAll() {
  const results = await Promise.allSettled([loadOverview(), loadStats(), loadList(), loadDetail(), loadCluster(adminURL),
    loadDeadLetters(adminURL, () => { state.listKey = ""; refresh(); }), loadConsumers(adminURL, refresh),
    loadViews(adminURL), loadWorkflows(adminURL, refresh), loadJournal(adminURL)]);
  if (!sessionStorage.getItem(TOKEN_KEY)) return; // signed out meanwhile
  if (results.some((r) => r.status === "rejected" && r.reason.status === 401)) {
    signOut("The server no longer accepts the token (401): sign in again.");
    return;
  }
  const failed = results.filter((r) => r.status === "rejected" && !(r.reason instanceof SignedOut)).map((r) => r.reason.message);
  const banner = $("error");
  banner.textContent = failed.length ? "Could not refresh: " + [...new Set(failed)].join("; ") : "";
  banner.hidden = failed.length === 0;
  $("updated").textContent = "Updated " + new Date().toLocaleTimeString("en-GB");
  updateRelativeTimes();
}

// ---- stats and store ------------------------------------------------------

function setTile(id, value, sub, tone) {
  const tile = $(id);
  tile.querySelector(".value").textContent = value;
  tile.querySelector(".sub").textContent = sub;
  tile.classList.remove("ok", "warn", "bad");
  if (tone) tile.classList.add(tone);
}

async function loadStats() {
  const s = await request("GET", adminURL("timers/stats"));
  const used = s.limit > 0 ? s.active / s.limit : 0;
  setTile("stat-active", count(s.active), (used * 100).toFixed(1) + "% of the limit",
    used >= 1 ? "bad" : used >= 0.8 ? "warn" : "");
  setTile("stat-due", count(s.dueWithin1m), "overdue ones included", "");
  setTile("stat-failing", count(s.failing), s.failing ? "retried with backoff" : "none", s.failing ? "bad" : "ok");
  setTile("stat-limit", count(s.limit), "timers at most", "");
}

async function loadOverview() {
  let o;
  try {
    o = await request("GET", consoleURL("api/overview"));
  } catch (e) {
    if (e.status === 503) {
      setTile("stat-store", "unreachable", e.message, "bad");
      return;
    }
    throw e;
  }
  state.serverOffset = Date.parse(o.now) - Date.now();
  const tones = { ok: "ok", wiped: "bad", "not running": "warn", unreachable: "bad" };
  setTile("stat-store", o.store.state, o.store.detail || "answering", tones[o.store.state] || "warn");
  drawChart($("chart-svg"), $("chart-summary"), o.due);
}

// ---- list -----------------------------------------------------------------

function listQuery() {
  const q = new URLSearchParams();
  const name = $("f-name").value;
  const upcoming = $("f-upcoming").value.trim();
  if (name) q.set("name", name);
  // The call filters match exactly: componentId, method and entityId.
  for (const [id, param] of [["f-component", "componentId"], ["f-method", "method"], ["f-entity", "entityId"]]) {
    const v = $(id).value.trim();
    if (v) q.set(param, v);
  }
  if ($("f-failing").checked) q.set("failing", "true");
  if ($("f-recurring").checked) q.set("recurring", "true");
  if (upcoming) q.set("upcoming", upcoming);
  q.set("limit", $("f-limit").value);
  const cursor = state.cursors[state.page];
  if (cursor) q.set("cursor", cursor);
  return q;
}

async function loadList() {
  const listError = $("list-error");
  let page;
  try {
    page = await request("GET", adminURL("timers?" + listQuery()));
  } catch (e) {
    if (e.status === 400) {
      listError.textContent = e.message;
      listError.hidden = false;
      state.listKey = "";
      state.nextCursor = "";
      $("timers").tBodies[0].replaceChildren();
      updatePager();
      return;
    }
    throw e;
  }
  listError.hidden = true;
  state.nextCursor = page.nextCursor || "";
  updatePager();
  // Rows are rebuilt only when the page changed, so that a refresh
  // neither flickers nor moves what the operator is about to click.
  const key = JSON.stringify(page.timers);
  if (key === state.listKey) return;
  state.listKey = key;
  $("timers").tBodies[0].replaceChildren(...page.timers.map(timerRow));
  $("list-empty").hidden = page.timers.length > 0;
  updateRelativeTimes();
}

function cell(label, ...content) {
  const td = document.createElement("td");
  td.dataset.label = label;
  td.append(...content);
  return td;
}

function timerRow(t) {
  const tr = document.createElement("tr");
  tr.dataset.name = t.name;
  tr.classList.toggle("selected", t.name === state.selected);
  const open = document.createElement("button");
  open.type = "button";
  open.className = "link";
  open.textContent = t.name;
  open.addEventListener("click", () => openTimer(t.name));
  const due = document.createElement("span");
  due.dataset.due = t.dueAt;
  due.title = absolute(t.dueAt);
  const status = document.createElement("span");
  status.className = "badge " + (t.lastError ? "failing" : "pending");
  status.textContent = t.lastError ? "failing" : "scheduled";
  if (t.lastError) status.title = t.lastError;
  statusBadge(t, status);
  const call = t.componentId + " · " + t.method + (t.entityId ? " · " + t.entityId : "");
  const attempts = String(t.attempts) + (t.maxRetries ? " of " + (t.maxRetries + 1) : "");
  const attemptsCell = cell("Attempts", attempts);
  attemptsCell.className = "num";
  tr.append(cell("Name", open), cell("Call", call), cell("Due", due), attemptsCell, cell("Status", status));
  return tr;
}

function updatePager() {
  $("page-no").textContent = "Page " + (state.page + 1);
  $("page-first").disabled = state.page === 0;
  $("page-prev").disabled = state.page === 0;
  $("page-next").disabled = !state.nextCursor;
}

function goToPage(page) {
  if (page > state.page) state.cursors[page] = state.nextCursor;
  state.page = page;
  state.cursors.length = page + 1;
  state.listKey = "";
  refresh();
}

function applyFilters(event) {
  if (event) event.preventDefault();
  state.cursors = [""];
  state.page = 0;
  state.listKey = "";
  refresh();
}

// ---- one timer ------------------------------------------------------------

function openTimer(name) {
  state.selected = name;
  for (const tr of $("timers").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.name === name);
  $("detail-name").textContent = name;
  $("detail").hidden = false;
  // Below the list on a narrow screen: bring it into view.
  if (window.matchMedia("(max-width: 999px)").matches) $("detail").scrollIntoView({ block: "start" });
  loadDetail().catch((e) => {
    if (e instanceof SignedOut) return;
    if (e.status === 401) signOut("The server no longer accepts the token (401): sign in again.");
    else showDetailError(e.message);
  });
}

function closeDetail() {
  state.selected = "";
  $("detail").hidden = true;
  for (const tr of $("timers").tBodies[0].rows) tr.classList.remove("selected");
}

function showDetailError(message) {
  const el = $("detail-error");
  el.textContent = message;
  el.hidden = !message;
}

async function loadDetail() {
  const name = state.selected;
  if (!name) return;
  let t;
  try {
    t = await request("GET", timerURL(name));
  } catch (e) {
    if (e.status !== 404) throw e;
    if (state.selected !== name) return;
    $("detail-fields").hidden = true;
    $("detail-delete").disabled = true;
    showDetailError("This timer no longer exists: it ran, or it was deleted.");
    return;
  }
  if (state.selected !== name) return; // another timer was opened meanwhile
  showDetailError("");
  $("detail-fields").hidden = false;
  $("detail-delete").disabled = false;
  $("d-component").textContent = t.componentId;
  $("d-method").textContent = t.method;
  $("d-entity").textContent = t.entityId || "—";
  setTime($("d-due"), t.dueAt);
  setTime($("d-created"), t.createdAt);
  $("d-attempts").textContent = t.attempts + (t.maxRetries ? " (gives up after " + (t.maxRetries + 1) + ")" : " (retried until it succeeds)");
  setTime($("d-last-attempt"), t.lastAttemptAt);
  $("d-last-error").textContent = t.lastError || "—";
  $("d-payload").textContent = t.payload === undefined ? "(none)" : JSON.stringify(t.payload, null, 2);
  showRecurring(t, timerURL(name), () => {
    state.listKey = "";
    refresh();
  }, showDetailError);
  updateRelativeTimes();
}

// setTime shows a time as UTC and, kept up to date, relative to now.
function setTime(el, iso) {
  if (!iso) {
    el.textContent = "—";
    delete el.dataset.due;
    return;
  }
  el.dataset.due = iso;
  el.dataset.absolute = "true";
  el.title = absolute(iso);
}

let noticeTimer = 0;

function askDelete() {
  $("confirm-name").textContent = state.selected;
  $("confirm").showModal();
}

async function confirmDelete() {
  const name = state.selected;
  $("confirm").close();
  try {
    await request("DELETE", timerURL(name));
  } catch (e) {
    if (e instanceof SignedOut) return;
    if (e.status === 401) signOut("The server no longer accepts the token (401): sign in again.");
    else showDetailError("Could not delete: " + e.message);
    return;
  }
  closeDetail();
  const notice = $("notice");
  notice.textContent = "Deleted timer " + name + ".";
  notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { notice.hidden = true; }, NOTICE_MS);
  state.listKey = "";
  refresh();
}

// ---- times ----------------------------------------------------------------

// updateRelativeTimes rewrites only the text of the times shown, which
// change every second although the data does not.
function updateRelativeTimes() {
  for (const el of document.querySelectorAll("[data-due]")) {
    const rel = relative(el.dataset.due, serverNow());
    el.textContent = el.dataset.absolute ? absolute(el.dataset.due) + " (" + rel + ")" : rel;
  }
}

// ---- wiring ---------------------------------------------------------------

$("login").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", () => signOut(""));
$("filters").addEventListener("submit", applyFilters);
$("f-failing").addEventListener("change", applyFilters);
$("f-recurring").addEventListener("change", applyFilters);
watchDeadFilters(() => refresh());
watchWorkflowFilters(() => refresh());
watchJournals(() => refresh());
$("f-limit").addEventListener("change", applyFilters);
$("f-reset").addEventListener("click", () => {
  $("filters").reset();
  applyFilters();
});
$("page-first").addEventListener("click", () => goToPage(0));
$("page-prev").addEventListener("click", () => goToPage(state.page - 1));
$("page-next").addEventListener("click", () => goToPage(state.page + 1));
$("detail-close").addEventListener("click", closeDetail);
$("detail-delete").addEventListener("click", askDelete);
$("confirm-delete").addEventListener("click", confirmDelete);
$("confirm-cancel").addEventListener("click", () => $("confirm").close());
$("refresh").addEventListener("change", () => {
  sessionStorage.setItem(REFRESH_KEY, $("refresh").value);
  scheduleRefresh();
});
setInterval(updateRelativeTimes, 1000);

const savedRefresh = sessionStorage.getItem(REFRESH_KEY);
if (savedRefresh !== null && [...$("refresh").options].some((o) => o.value === savedRefresh)) {
  $("refresh").value = savedRefresh;
}
if (sessionStorage.getItem(TOKEN_KEY)) {
  showConsole();
  refresh();
} else {
  showLogin("");
}
