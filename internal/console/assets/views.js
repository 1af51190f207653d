// The views: each with its generation (whether it answers, or is being
// rebuilt while the one before answers) and its lag on the shards this
// instance projects (the admin API's GET views). Hidden when the service
// runs no view. Like the rest of the page, data goes in with textContent
// and DOM nodes only.

import { cell } from "./dom.js";
import { count } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// loadViews reads the views and shows them; adminURL resolves an admin API
// path.
export async function loadViews(adminURL) {
  const views = await request("GET", adminURL("views"));
  if (views.length === 0) {
    clearViews();
    return;
  }
  $("view-list").tBodies[0].replaceChildren(...views.map(viewRow));
  $("views").hidden = false;
}

// clearViews hides the section and forgets what it showed.
export function clearViews() {
  $("views").hidden = true;
  $("view-list").tBodies[0].replaceChildren();
}

function viewRow(v) {
  const tr = document.createElement("tr");
  tr.dataset.name = v.name;
  tr.classList.toggle("behind", v.lagChanges > 0 || !v.answering);
  const name = document.createElement("span");
  name.className = "mono name";
  name.textContent = v.name;
  const gen = document.createElement("span");
  gen.className = "mono";
  gen.textContent = v.generation;
  const state = cell("State", v.answering ? "answering" : "rebuilding");
  const shards = cell("Shards here", count(v.shards));
  shards.className = "num";
  const lag = cell("Lag", count(v.lagChanges) + (v.lagChanges === 1 ? " change" : " changes"));
  lag.className = "num";
  const oldest = cell("Oldest unapplied", v.lagChanges > 0 ? v.lagSeconds.toFixed(1) + " s ago" : "—");
  tr.append(cell("View", name), cell("Generation", gen), state, shards, lag, oldest);
  return tr;
}
