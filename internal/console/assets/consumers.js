// The consumers: each with its lag on the shards this instance consumes
// (the admin API's GET consumers), and the changes they gave up after
// their retries (GET consumers/{id}/dead-letters), each with Retry (the
// handler runs once more, here and now) and Drop (a second click
// confirms). Hidden when the service runs no consumer. Like the rest of
// the page, data goes in with textContent and DOM nodes only.

import { button, cell, confirmButton } from "./dom.js";
import { absolute, count } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// deadPath is the admin API path of a consumer's dead letters.
const deadPath = (consumer) => "consumers/" + encodeURIComponent(consumer) + "/dead-letters";

// loadConsumers reads the consumers and the dead letters of those that
// hold some, and shows them; adminURL resolves an admin API path, and
// changed is called after a retry or a drop.
export async function loadConsumers(adminURL, changed) {
  const consumers = await request("GET", adminURL("consumers"));
  if (consumers.length === 0) {
    clearConsumers();
    return;
  }
  const lists = await Promise.all(consumers.filter((c) => c.deadLetters > 0).map((c) => request("GET", adminURL(deadPath(c.id)))));
  const dead = lists.flat();
  $("consumer-list").tBodies[0].replaceChildren(...consumers.map(consumerRow));
  // Rebuilt only when they changed, so that an armed Drop stays armed.
  const body = $("consumer-dead").tBodies[0];
  const key = JSON.stringify(dead);
  if (body.dataset.key !== key) {
    body.dataset.key = key;
    body.replaceChildren(...dead.map((d) => deadRow(d, adminURL, changed)));
  }
  $("consumer-dead-empty").hidden = dead.length > 0;
  $("consumers").hidden = false;
}

// clearConsumers hides the section and forgets what it showed.
export function clearConsumers() {
  $("consumers").hidden = true;
  $("consumer-list").tBodies[0].replaceChildren();
  const body = $("consumer-dead").tBodies[0];
  body.replaceChildren();
  delete body.dataset.key;
  $("consumers-error").hidden = true;
}

function consumerRow(c) {
  const tr = document.createElement("tr");
  tr.dataset.id = c.id;
  tr.classList.toggle("behind", c.lagChanges > 0);
  const name = document.createElement("span");
  name.className = "mono name";
  name.textContent = c.id;
  const lag = cell("Lag", count(c.lagChanges) + (c.lagChanges === 1 ? " change" : " changes"));
  lag.className = "num";
  const oldest = cell("Oldest unhandled", c.lagChanges > 0 ? c.lagSeconds.toFixed(1) + " s ago" : "—");
  const dead = cell("Dead letters", count(c.deadLetters));
  dead.className = "num";
  tr.append(cell("Consumer", name), lag, oldest, dead);
  return tr;
}

function deadRow(d, adminURL, changed) {
  const tr = document.createElement("tr");
  tr.dataset.consumer = d.consumer;
  tr.dataset.entity = d.entityId;
  const url = (suffix) => adminURL(deadPath(d.consumer) + "/" + encodeURIComponent(d.entityId) + suffix);
  const act = async (method, suffix, verb) => {
    try {
      await request(method, url(suffix));
      $("consumers-error").hidden = true;
    } catch (e) {
      $("consumers-error").textContent = "Could not " + verb + " " + d.consumer + "'s change of " + d.entityId + ": " + e.message;
      $("consumers-error").hidden = false;
    }
    changed();
  };
  const retry = button("Retry", "retry", () => act("POST", "/retry", "retry"));
  const drop = confirmButton("Drop", "Confirm drop", "drop", () => act("DELETE", "", "drop"));
  const entity = document.createElement("span");
  entity.className = "mono";
  entity.textContent = d.entityType + " · " + d.entityId;
  tr.append(cell("Consumer", d.consumer), cell("Entity", entity),
    cell("Revision", String(d.revision) + (d.deleted ? " (deleted)" : "")), cell("Given up", absolute(d.at)),
    cell("Attempts", String(d.attempts)), cell("Last error", d.error), cell("", retry, " ", drop));
  return tr;
}
