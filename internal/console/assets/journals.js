// The journals: an event-sourced entity looked up by its type and id, with
// its journal's head (the last event's number, whether it was deleted, its
// snapshot and why it does not load, from the admin API's GET
// eventsourced/{type}/{id}) and a page of its events, newest first (GET
// eventsourced/{type}/{id}/events, which pages oldest first after a number:
// a page here asks for the numbers just below the newest it shows). Like
// the rest of the page, data goes in with textContent and DOM nodes only.

import { cell } from "./dom.js";
import { absolute } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// PAGE is how many events a page shows.
const PAGE = 20;

// shown is the entity looked up ("" when none) and the page of its events:
// top is the number of the newest event shown, newest whether the page
// follows the journal's end as it grows.
let shown = { type: "", id: "", top: 0, newest: true };

const entityPath = (type, id) => "eventsourced/" + encodeURIComponent(type) + "/" + encodeURIComponent(id);

// watchJournals looks an entity up when the form is sent, and moves
// between pages; reload loads the page's data again (loadJournal among it).
export function watchJournals(reload) {
  $("journal-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const type = $("es-type").value.trim();
    const id = $("es-id").value.trim();
    if (!type || !id) {
      showError("Enter the entity type and the entity id.");
      return;
    }
    shown = { type, id, top: 0, newest: true };
    reload();
  });
  $("journal-older").addEventListener("click", () => {
    shown = { ...shown, top: Math.max(0, shown.top - PAGE), newest: false };
    reload();
  });
  $("journal-newer").addEventListener("click", () => {
    shown = { ...shown, top: shown.top + PAGE, newest: false };
    reload();
  });
}

// loadJournal reads the entity looked up, if any, and its page of events,
// and shows them; adminURL resolves an admin API path. A failure shows in
// the section, not in the page's banner (a 401 signs out, as elsewhere).
export async function loadJournal(adminURL) {
  if (!shown.id) return;
  const { type, id } = shown;
  let head, page;
  try {
    head = await request("GET", adminURL(entityPath(type, id)));
    const top = shown.newest ? head.seq : Math.min(shown.top, head.seq);
    const after = Math.max(0, top - PAGE);
    page = { top, after, events: [] };
    if (top > after) {
      const q = new URLSearchParams({ after: String(after), limit: String(top - after) });
      const got = await request("GET", adminURL(entityPath(type, id) + "/events?" + q));
      page.events = got.events.filter((e) => e.seq <= top).reverse();
    }
  } catch (e) {
    if (e.status === 401) throw e;
    showError("Could not read " + type + " " + id + ": " + e.message);
    return;
  }
  if (shown.type !== type || shown.id !== id) return; // another was looked up meanwhile
  shown.top = page.top;
  shown.newest = page.top >= head.seq;
  $("journal-error").hidden = true;
  showHead(type, id, head);
  showEvents(head, page);
}

// clearJournals forgets the entity shown.
export function clearJournals() {
  shown = { type: "", id: "", top: 0, newest: true };
  $("journal-detail").hidden = true;
  $("journal-error").hidden = true;
  $("journal-events").tBodies[0].replaceChildren();
}

function showError(message) {
  $("journal-error").textContent = message;
  $("journal-error").hidden = false;
}

function showHead(type, id, head) {
  $("jd-title").textContent = type + " · " + id;
  $("jd-seq").textContent = String(head.seq);
  $("jd-deleted").textContent = head.deleted ? "yes: its commands are refused" : "no";
  const snap = head.snapshot;
  $("jd-snapshot").textContent = snap ? "after event " + snap.seq + ", taken " + absolute(snap.at) : "none";
  $("jd-state").textContent = snap ? JSON.stringify(snap.state, null, 2) : "";
  $("jd-state").hidden = !snap;
  $("jd-load-error").textContent = head.loadError || "";
  $("jd-load-error").hidden = !head.loadError;
  $("journal-detail").hidden = false;
}

// showEvents shows a page, newest first. Older pages end where the events
// kept end: those a snapshot covers may have been dropped (retention).
function showEvents(head, page) {
  $("journal-events").tBodies[0].replaceChildren(...page.events.map((e) => {
    const tr = document.createElement("tr");
    tr.dataset.seq = String(e.seq);
    const data = document.createElement("code");
    data.textContent = JSON.stringify(e.data);
    tr.append(cell("Seq", String(e.seq)), cell("Event", e.name), cell("At", absolute(e.at)), cell("Data", data));
    return tr;
  }));
  const oldest = page.events.length ? page.events[page.events.length - 1].seq : 0;
  $("journal-empty").hidden = page.events.length > 0;
  $("journal-range").textContent = page.events.length
    ? "Events " + oldest + " to " + page.events[0].seq + " of " + head.seq
    : head.seq ? "No event kept here" : "No event";
  $("journal-older").disabled = page.after === 0 || oldest !== page.after + 1;
  $("journal-newer").disabled = page.top >= head.seq;
}
