package audio

import (
	"os"
	"strconv"
	"testing"
)

func TestDbgGrid(t *testing.T) {
	needGridTools(t)
	seed, _ := strconv.Atoi(os.Getenv("SEED"))
	cl := &clips{dir: t.TempDir(), m: map[string][]float32{}}
	cond := gridConditions()[seed]
	c, truth := gridCall(t, cl, cond, 2000)
	ogg := encodeGrid(t, cl.dir, c, cond)
	f, _ := os.Open(ogg)
	defer f.Close()
	res, _ := Analyze(f, Config{})
	t.Logf("user  %v", res.UserSegments)
	t.Logf("truth %v", c.truth[0])
	t.Logf("agent %v", res.AgentSegments)
	t.Logf("truth %v", c.truth[1])
	t.Logf("turns %v", res.Turns)
	t.Logf("truth %v", truth.turns)
	t.Logf("sep %v", res.Metrics.SeparationDB)
}
