// Package components will own the component model: component ids, typed
// method handles, the component registry, the component client that invokes
// a component now or builds a deferred call, and the dispatch of deferred
// calls by name.
package components
