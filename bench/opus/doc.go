// Package opus measures the two pure-Go Opus decoders side by side on the
// same stereo call, for the choice recorded in docs/audio.md. It is its own
// module so that the candidate not chosen (a 67 MB module) stays out of
// lkscore's go.mod.
package opus
