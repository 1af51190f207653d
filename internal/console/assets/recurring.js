// Recurring timers in the console: how a schedule reads, the badge of a
// recurring timer in the list, and the detail's schedule, next runs and
// Pause/Resume button (POST timers/{name}/pause or /resume). Data goes in
// with textContent and DOM nodes only.

import { absolute } from "./format.js";
import { request } from "./http.js";

const $ = (id) => document.getElementById(id);

// describeSchedule is a schedule in a few words: "every 5m0s" or "cron
// 0 2 * * * (Europe/Paris)", then its policies when not the defaults.
export function describeSchedule(s) {
  let text = s.every ? "every " + s.every : "cron " + s.cron + " (" + (s.timeZone || "UTC") + ")";
  if (s.jitter) text += ", jitter " + s.jitter;
  if (s.overlap && s.overlap !== "skip") text += ", overlap " + s.overlap;
  if (s.catchUp && s.catchUp !== "once") text += ", catch-up " + s.catchUp + (s.catchUp === "all" ? " within " + s.catchUpWindow : "");
  if (s.end) text += ", until " + absolute(s.end);
  return text;
}

// statusBadge is the list's status of a recurring timer (a failing run
// shows as failing, as a single timer's call does).
export function statusBadge(t, badge) {
  if (t.lastError || !t.recurring) return;
  badge.className = "badge " + (t.recurring.paused ? "paused" : "recurring");
  badge.textContent = t.recurring.paused ? "paused" : "recurring";
  badge.title = describeSchedule(t.recurring.schedule);
}

// showRecurring fills the detail's recurring part for timer t (hidden for
// a single timer); url is the timer's admin URL, changed is called after
// a pause or a resume, and fail with a message when one fails.
export function showRecurring(t, url, changed, fail) {
  const rc = t.recurring;
  for (const id of ["d-schedule-row", "d-next-row", "d-schedule", "d-next-dd"]) $(id).hidden = !rc;
  const toggle = $("detail-pause");
  toggle.hidden = !rc;
  if (!rc) return;
  $("d-schedule").textContent = describeSchedule(rc.schedule) + (rc.paused ? " — paused" : "");
  const runs = $("d-next-runs");
  runs.replaceChildren(...rc.nextRuns.map((iso) => {
    const li = document.createElement("li");
    li.textContent = absolute(iso);
    return li;
  }));
  if (rc.nextRuns.length === 0) runs.replaceChildren(document.createTextNode(rc.paused ? "none while paused" : "none"));
  toggle.textContent = rc.paused ? "Resume" : "Pause";
  toggle.onclick = async () => {
    toggle.disabled = true;
    try {
      await request("POST", new URL(url.href + (rc.paused ? "/resume" : "/pause")));
    } catch (e) {
      fail("Could not " + (rc.paused ? "resume" : "pause") + ": " + e.message);
    } finally {
      toggle.disabled = false;
    }
    changed();
  };
}
