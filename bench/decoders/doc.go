// Package decoders measures candidate JSON decoders side by side on the same
// chat_history.json (the field mix's histories, scenarios/load/field), for the choice
// recorded in docs/performance.md. It is its own module so that the candidates
// stay out of lkscore's go.mod.
package decoders
