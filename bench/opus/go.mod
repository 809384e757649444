module github.com/lkscore/lkscore/bench/opus

go 1.26.8

require (
	github.com/pion/opus v0.1.0
	github.com/thesyncim/gopus v0.1.0
)
