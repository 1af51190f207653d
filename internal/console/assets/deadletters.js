// The dead letters: the timers that gave up, oldest death first (the
// admin API's first page of GET dead-letters), each with Retry (run it
// again now, with fresh retries) and Delete (a second click confirms).
// Like the rest of the page, data goes in with textContent and DOM nodes
// only.

import { button, cell, confirmButton } from "./dom.js";
import { absolute } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// loadDeadLetters reads the first page and shows it; adminURL resolves an
// admin API path, and changed is called after a retry or a delete.
export async function loadDeadLetters(adminURL, changed) {
  const q = new URLSearchParams({ limit: "100" });
  // The call filters match exactly, as the timer list's do.
  for (const [id, param] of [["df-component", "componentId"], ["df-method", "method"], ["df-entity", "entityId"]]) {
    const v = $(id).value.trim();
    if (v) q.set(param, v);
  }
  const page = await request("GET", adminURL("dead-letters?" + q));
  const key = JSON.stringify(page.deadLetters);
  const body = $("dead-letters").tBodies[0];
  if (body.dataset.key === key) return;
  body.dataset.key = key;
  body.replaceChildren(...page.deadLetters.map((d) => deadRow(d, adminURL, changed)));
  $("dead-empty").hidden = page.deadLetters.length > 0;
  $("dead-more").hidden = !page.nextCursor;
}

// watchDeadFilters reloads the section when its filters are applied.
export function watchDeadFilters(reload) {
  $("dead-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    reload();
  });
}

// clearDeadLetters empties the section (on signing out).
export function clearDeadLetters() {
  const body = $("dead-letters").tBodies[0];
  body.replaceChildren();
  delete body.dataset.key;
  $("dead-error").hidden = true;
}

function deadRow(d, adminURL, changed) {
  const t = d.timer;
  const tr = document.createElement("tr");
  tr.dataset.name = t.name;
  const died = document.createElement("span");
  died.textContent = absolute(d.diedAt);
  const url = (suffix) => adminURL("dead-letters/" + encodeURIComponent(t.name) + suffix);
  const act = async (method, suffix) => {
    try {
      await request(method, url(suffix));
      $("dead-error").hidden = true;
    } catch (e) {
      $("dead-error").textContent = "Could not " + (suffix ? "retry " : "delete ") + t.name + ": " + e.message;
      $("dead-error").hidden = false;
    }
    changed();
  };
  const retry = button("Retry", "retry", () => act("POST", "/retry"));
  const del = confirmButton("Delete", "Confirm delete", "delete", () => act("DELETE", ""));
  tr.append(cell("Name", t.name), cell("Call", t.componentId + " · " + t.method + (t.entityId ? " · " + t.entityId : "")),
    cell("Died", died), cell("Attempts", String(t.attempts)), cell("Last error", t.lastError || ""), cell("", retry, " ", del));
  return tr;
}
