// How the console writes numbers and times.

const numbers = new Intl.NumberFormat("en-US");

// count writes a count with thousands separators: 50,000.
export const count = (n) => numbers.format(n);

// absolute writes an RFC 3339 time as UTC to the second.
export function absolute(iso) {
  return new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/Z$/, " UTC");
}

// span writes a number of seconds the short way: 45s, 4m 05s, 2h 10m, 3d 4h.
function span(seconds) {
  const pad = (n) => String(n).padStart(2, "0");
  if (seconds < 60) return seconds + "s";
  const m = Math.floor(seconds / 60);
  if (m < 60) return m + "m " + pad(seconds % 60) + "s";
  const h = Math.floor(m / 60);
  if (h < 48) return h + "h " + pad(m % 60) + "m";
  return Math.floor(h / 24) + "d " + (h % 24) + "h";
}

// relative writes how far an RFC 3339 time is from nowMs: in 4m 05s, 3s ago.
export function relative(iso, nowMs) {
  const ms = Date.parse(iso) - nowMs;
  const s = Math.round(Math.abs(ms) / 1000);
  if (s === 0) return "now";
  return ms > 0 ? "in " + span(s) : span(s) + " ago";
}
