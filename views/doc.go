// Package views keeps tables of rows built from an entity type's changes,
// indexed for the queries declared with them, paged by token, and
// followed live over Server-Sent Events.
//
// A view is defined from a key-value entity type (Define), a workflow
// type (DefineWorkflow: the instances as they move) or an event-sourced
// entity type (DefineEvents: each event folded into the entity's row),
// with an
// updater, a pure function that maps each change of an entity to its row
// (Upsert), to no row (Delete), or to nothing (Ignore); the row is a Go
// struct encoded with encoding/json. Queries are declared with the view
// (View.Query): equality on some of the row's fields (Eq), an order on
// one more (SortBy), a range on that field (Range), a maximum page size
// (MaxLimit). Each query is its own index, kept with the rows; Start
// refuses, naming the field, a query over a field the row does not have
// or cannot index.
//
// # What a view sees, and when
//
// The view is fed by the per-shard change log the entity store writes in
// the same atomic step as the state (the log consumers read): a projector
// per view and shard, on the instance that serves the shard, applies the
// shard's changes in order, a batch at a time, each batch with its rows,
// index entries and the position of its last change in one atomic step
// (one Lua script in the view's slot on Redis, refused once an owner of
// the shard with a newer fence has opened it),
// so a batch applied again is a no-op. A view never built on a shard, or
// behind the log's bound, is built from the entities' current states.
// Queries read the store on any instance: a page may miss changes the
// projector has not applied yet (its lag, in /metrics); a query that must
// see a command's change waits for its position (Request.After, from
// Runner.Written after the command replied).
//
// # Paging
//
// A page's token (Page.Next) holds the index key of its last row and the
// view's write counter when the first page was read: the next page starts
// after that key and leaves out the index entries made since. A row that stays in the result without moving is seen
// exactly once across the pages; a row that moves, leaves or enters the
// result during the paging is seen at most once; the order holds across
// pages. Tokens are plain data (no state on the instance that made them),
// sealed with a key kept in the store, and survive a restart; a token of
// another query, of other parameters, altered, or not a token is refused
// (ErrBadToken). Offsets are not offered.
//
// # Following a query
//
// Query.ServeStream answers a request with the query's result as
// Server-Sent Events: its rows, then each row added to, changed in or
// removed from the result, read from the feed each shard's view keeps
// with its rows. Each event after the rows carries the cursor after it;
// a client that reconnects with it (Last-Event-ID) resumes with nothing
// missed and nothing repeated, on any instance. When the changes since a
// cursor can no longer be told, a "reset" event precedes the rows anew.
//
// # Changing a view
//
// A view's rows are kept under its generation: its name and a
// fingerprint of its version (View.Version), entity type, row type and
// queries. A changed view is a new generation, built from the entities'
// current states while the one before answers, then swapped in once it
// is built on every shard (Runner.Rebuilt).
//
// # Storage
//
// On Redis and Redis Cluster every key of a view (of one generation)
// carries the view's hash tag (see NewRedisStore): its rows, one index per
// query for the whole view, and each shard's position and feed. A batch is
// one script there, and a page is one script: a range of the query's
// index and the rows it names. In memory, each index is a sorted slice.
package views
