// Package console owns the operator console for timers: a browser page
// served under the admin API (at /admin/console) that shows the timer
// store at a glance, lists, filters and pages timers, opens and deletes
// one (a recurring one shows its schedule and next runs, and pauses and
// resumes), lists and filters the dead letters (retry, delete), shows an
// event-sourced entity's journal (its head and its events, newest first,
// paged), and charts the timers due
// over the next hour, refreshed live; on
// an instance of a cluster it also shows the members (status, shards,
// last heartbeat) and a map of the shards by owner.
//
// The page is an html/template with a few plain JavaScript modules (no
// library) and one CSS file, all embedded with go:embed: there is no build
// step. The page and
// its assets carry no secret and need no token; the browser asks the
// operator for the admin token once per tab (kept in sessionStorage) and
// sends it as an Authorization header, never in a URL. The data comes from
// the admin API itself (stats, list, get, delete, the cluster), one directory up from
// the console, and from the console's one endpoint of its own, api/overview
// (the store's state and the chart, which the admin API does not give),
// guarded by the same admin-token middleware. Every response carries a
// Content-Security-Policy that allows no inline script or style.
package console
