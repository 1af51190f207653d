// Package entities will own key-value entities: the effects a command handler
// returns, the entity actor that runs on the runtime's local sharding (one
// command at a time per id, passivated when idle) and the state store
// (memory and Redis).
package entities
