// The workflows: the started workflow types (the admin API's GET
// workflows), one type's instances of a status (GET workflows/{type}),
// each with the operator's actions that its status takes (POST
// workflows/{type}/{id}/actions: suspend, resume, retry, cancel after a
// second click, skip to a chosen step), and one instance's state and
// history (GET workflows/{type}/{id}). Hidden when the service runs no
// workflow. Like the rest of the page, data goes in with textContent and
// DOM nodes only.

import { button, cell, confirmButton } from "./dom.js";
import { absolute } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// shown is the instance whose history shows ("" when none).
let shown = { type: "", id: "" };

const instancePath = (type, id) => "workflows/" + encodeURIComponent(type) + "/" + encodeURIComponent(id);

// loadWorkflows reads the workflow types and the instances of the chosen
// type and status, and shows them; adminURL resolves an admin API path,
// and changed is called after an action.
export async function loadWorkflows(adminURL, changed) {
  const types = await request("GET", adminURL("workflows"));
  if (types.length === 0) {
    clearWorkflows();
    return;
  }
  const select = $("wf-type");
  const names = types.map((t) => t.type);
  if (select.dataset.key !== names.join("\n")) {
    select.dataset.key = names.join("\n");
    const keep = select.value;
    select.replaceChildren(...names.map((n) => new Option(n, n)));
    if (names.includes(keep)) select.value = keep;
  }
  const type = types.find((t) => t.type === select.value) || types[0];
  const status = $("wf-status").value;
  const q = new URLSearchParams({ limit: "100" });
  if (status) q.set("status", status);
  const page = await request("GET", adminURL("workflows/" + encodeURIComponent(type.type) + "?" + q));
  // Rebuilt only when they changed, so that an armed Cancel stays armed
  // and a chosen step stays chosen.
  const body = $("workflow-list").tBodies[0];
  const key = JSON.stringify([type, status, page]);
  if (body.dataset.key !== key) {
    body.dataset.key = key;
    body.replaceChildren(...page.workflows.map((w) => workflowRow(w, type.steps, adminURL, changed)));
  }
  $("workflow-empty").hidden = page.workflows.length > 0;
  $("workflow-more").hidden = !page.more;
  $("workflows").hidden = false;
  if (shown.id) await showWorkflow(adminURL, shown.type, shown.id);
}

// watchWorkflowFilters reloads the list when the type or status changes.
export function watchWorkflowFilters(reload) {
  for (const id of ["wf-type", "wf-status"]) $(id).addEventListener("change", reload);
}

// clearWorkflows hides the section and forgets what it showed.
export function clearWorkflows() {
  $("workflows").hidden = true;
  const body = $("workflow-list").tBodies[0];
  body.replaceChildren();
  delete body.dataset.key;
  $("wf-type").replaceChildren();
  delete $("wf-type").dataset.key;
  $("workflows-error").hidden = true;
  closeWorkflow();
}

function closeWorkflow() {
  shown = { type: "", id: "" };
  $("workflow-detail").hidden = true;
  $("workflow-history").tBodies[0].replaceChildren();
}

// actionsFor are the actions an instance's status takes.
function actionsFor(w) {
  switch (w.status) {
    case "running":
      return ["suspend", "retry", "cancel", "skip"];
    case "paused":
      return w.suspended ? ["resume", "cancel", "skip"] : ["cancel", "skip"];
    case "failed":
      return w.step ? ["retry", "cancel", "skip"] : ["cancel", "skip"];
  }
  return [];
}

function workflowRow(w, steps, adminURL, changed) {
  const tr = document.createElement("tr");
  tr.dataset.id = w.id;
  tr.dataset.status = w.status;
  const act = async (body) => {
    try {
      await request("POST", adminURL(instancePath(w.type, w.id) + "/actions"), undefined, body);
      $("workflows-error").hidden = true;
    } catch (e) {
      $("workflows-error").textContent = "Could not " + body.action + " " + w.type + " " + w.id + ": " + e.message;
      $("workflows-error").hidden = false;
    }
    changed();
  };
  const open = button(w.id, "open mono", () => {
    shown = { type: w.type, id: w.id };
    showWorkflow(adminURL, w.type, w.id);
  });
  const controls = [];
  for (const action of actionsFor(w)) {
    if (action === "cancel") {
      controls.push(confirmButton("Cancel", "Confirm cancel", "cancel", () => act({ action })));
    } else if (action === "skip") {
      const to = document.createElement("select");
      to.className = "skip-to";
      to.setAttribute("aria-label", "Step to skip " + w.id + " to");
      to.append(...steps.map((s) => new Option(s, s)));
      controls.push(to, button("Skip", "skip", () => act({ action, step: to.value })));
    } else {
      controls.push(button(action[0].toUpperCase() + action.slice(1), action, () => act({ action })));
    }
  }
  const actions = document.createElement("div");
  actions.className = "actions";
  actions.append(...controls);
  const status = w.suspended ? "suspended" : w.status;
  tr.append(cell("Workflow", open), cell("Status", status), cell("Step", w.step || "—"),
    cell("Attempt", String(w.attempt)), cell("Error", w.error || ""), cell("Actions", actions));
  return tr;
}

// showWorkflow reads one instance and shows its state and history.
async function showWorkflow(adminURL, type, id) {
  let w;
  try {
    w = await request("GET", adminURL(instancePath(type, id)));
  } catch (e) {
    $("workflows-error").textContent = "Could not read " + type + " " + id + ": " + e.message;
    $("workflows-error").hidden = false;
    closeWorkflow();
    return;
  }
  $("wd-title").textContent = type + " · " + id;
  $("wd-state").textContent = JSON.stringify(w.state ?? null, null, 2);
  $("workflow-history").tBodies[0].replaceChildren(...(w.history || []).map((h) => {
    const tr = document.createElement("tr");
    tr.append(cell("Transition", String(h.transition)), cell("Step", h.step || "—"), cell("Attempt", h.attempt ? String(h.attempt) : ""),
      cell("Started", h.started ? absolute(h.started) : ""), cell("At", absolute(h.at)), cell("Outcome", h.outcome),
      cell("Error", h.error || ""));
    return tr;
  }));
  $("workflow-detail").hidden = false;
}
