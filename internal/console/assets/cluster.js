// The cluster view: the members of the cluster this instance is part of,
// and a map of its 256 shards, read from the admin API's GET cluster and
// GET cluster/shards. Hidden when the instance is not part of a cluster.
// Like the rest of the page, data goes in with textContent and DOM nodes
// only.

import { cell } from "./dom.js";
import { absolute, count, relative } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// COLOURS is how many owner colours the style sheet has (.o0 to .o7).
const COLOURS = 8;

// loadCluster reads both routes (adminURL resolves an admin API path) and
// shows them; the section stays hidden outside a cluster.
export async function loadCluster(adminURL) {
  const [c, s] = await Promise.all([request("GET", adminURL("cluster")), request("GET", adminURL("cluster/shards"))]);
  if (!c.enabled || !s.enabled) {
    clearCluster();
    return;
  }
  // A member's colour is its place among the members, as listed.
  const colour = new Map(c.members.map((m, i) => [m.id, "o" + (i % COLOURS)]));
  const now = Date.parse(c.now);
  $("members").tBodies[0].replaceChildren(...c.members.map((m) => memberRow(m, colour.get(m.id), now)));
  $("shard-map").replaceChildren(...s.shards.map((sh) => shardCell(sh, colour)));
  const n = c.shards;
  const alive = c.members.filter((m) => m.status !== "lapsed").length;
  $("cluster-summary").textContent = count(alive) + (alive === 1 ? " member" : " members") + " alive; " +
    n.owned + " of " + n.total + " shards owned (" + n.served + " served, " + n.handingOver + " handing over), " +
    n.orphaned + " with a lapsed owner, " + n.unowned + " unowned.";
  $("cluster").hidden = false;
}

// clearCluster hides the section and forgets what it showed.
export function clearCluster() {
  $("cluster").hidden = true;
  $("members").tBodies[0].replaceChildren();
  $("shard-map").replaceChildren();
  $("cluster-summary").textContent = "";
}

function memberRow(m, colourClass, now) {
  const tr = document.createElement("tr");
  tr.dataset.id = m.id;
  tr.classList.toggle("self", m.self);
  const swatch = document.createElement("span");
  swatch.className = "swatch " + colourClass;
  const id = document.createElement("span");
  id.className = "mono name";
  id.textContent = m.id + (m.self ? " (this instance)" : "");
  const status = document.createElement("span");
  status.className = "badge " + m.status;
  status.textContent = m.status;
  const shards = cell("Shards", String(m.shards));
  shards.className = "num";
  const beat = document.createElement("span");
  beat.className = "heartbeat";
  if (m.heartbeatAgeMs !== undefined) {
    beat.textContent = (m.heartbeatAgeMs / 1000).toFixed(1) + " s ago";
    beat.title = absolute(m.heartbeatAt) + "; the lease ends " + relative(m.leaseExpiresAt, now);
  } else {
    beat.textContent = "—";
    beat.title = "its lease expired";
  }
  const joined = document.createElement("span");
  joined.textContent = m.joinedAt ? relative(m.joinedAt, now) : "—";
  if (m.joinedAt) joined.title = absolute(m.joinedAt);
  tr.append(cell("Member", swatch, id), cell("Address", m.addr || "—"), cell("Status", status), shards,
    cell("Heartbeat", beat), cell("Joined", joined));
  return tr;
}

function shardCell(sh, colour) {
  const el = document.createElement("span");
  el.className = "shard " + sh.state + (sh.owner && colour.has(sh.owner) ? " " + colour.get(sh.owner) : "");
  el.dataset.shard = String(sh.shard);
  el.dataset.state = sh.state;
  if (sh.owner) el.dataset.owner = sh.owner;
  el.title = "shard " + sh.shard + " · " + sh.state.replace("_", " ") + (sh.owner ? " · " + sh.owner : "") + " · epoch " + sh.epoch;
  return el;
}
