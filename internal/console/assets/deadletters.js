// The dead letters: the timers that gave up, oldest death first (the
// admin API's first page of GET dead-letters), each with Retry (run it
// again now, with fresh retries) and Delete (a second click confirms).
// Like the rest of the page, data goes in with textContent and DOM nodes
// only.

import { absolute } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// loadDeadLetters reads the first page and shows it; adminURL resolves an
// admin API path, and changed is called after a retry or a delete.
export async function loadDeadLetters(adminURL, changed) {
  const page = await request("GET", adminURL("dead-letters?limit=100"));
  const key = JSON.stringify(page.deadLetters);
  const body = $("dead-letters").tBodies[0];
  if (body.dataset.key === key) return;
  body.dataset.key = key;
  body.replaceChildren(...page.deadLetters.map((d) => deadRow(d, adminURL, changed)));
  $("dead-empty").hidden = page.deadLetters.length > 0;
  $("dead-more").hidden = !page.nextCursor;
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
  const del = button("Delete", "delete", () => {
    if (del.dataset.armed) act("DELETE", "");
    else {
      del.dataset.armed = "1";
      del.textContent = "Confirm delete";
    }
  });
  tr.append(cell("Name", t.name), cell("Call", t.componentId + " · " + t.method + (t.entityId ? " · " + t.entityId : "")),
    cell("Died", died), cell("Attempts", String(t.attempts)), cell("Last error", t.lastError || ""), cell("", retry, " ", del));
  return tr;
}

function button(text, cls, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = text;
  b.addEventListener("click", onClick);
  return b;
}

function cell(label, ...content) {
  const td = document.createElement("td");
  td.dataset.label = label;
  td.append(...content);
  return td;
}
