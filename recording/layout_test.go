package recording

import (
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	l, err := NewLayout("lk", "{date}/{agent_name}/{room_id}/{job_id}/")
	if err != nil {
		t.Fatal(err)
	}
	v := Vars{RoomID: "RM_a", JobID: "AJ_b", Date: "2026-11-29"}
	dir := l.Dir(v)
	if dir != "lk/2026-11-29/_/RM_a/AJ_b/" {
		t.Fatalf("dir %q", dir)
	}
	got, ok := l.Match(dir + ObjectHeader)
	if !ok || got.RoomID != "RM_a" || got.JobID != "AJ_b" || got.Date != "2026-11-29" || got.AgentName != "_" {
		t.Fatalf("match %+v %v", got, ok)
	}
	if _, ok := l.Match(dir + ObjectChatHistory); ok {
		t.Error("matched a non-header key")
	}
	if p := l.RoomPrefix(Vars{RoomID: "RM_a"}); p != "lk/" {
		t.Errorf("room prefix %q", p)
	}
	d, _ := NewLayout("", DefaultKeyTemplate)
	if p := d.RoomPrefix(Vars{RoomID: "RM_a"}); p != "RM_a/" {
		t.Errorf("default room prefix %q", p)
	}
	if d.Dir(Vars{RoomID: "RM_a", JobID: "../x"}) != "RM_a/.._x/" {
		t.Errorf("slash in a value escaped a segment: %q", d.Dir(Vars{RoomID: "RM_a", JobID: "../x"}))
	}
	p, _ := NewLayout("pre/", "{prefix}rooms/{room_name}/{room_id}/{job_id}/")
	if got := p.Dir(Vars{RoomID: "RM_a", JobID: "AJ_b", RoomName: "demo"}); got != "pre/rooms/demo/RM_a/AJ_b/" {
		t.Errorf("explicit prefix: %q", got)
	}
	if got := p.RoomPrefix(Vars{RoomID: "RM_a", RoomName: "demo"}); got != "pre/rooms/demo/RM_a/" {
		t.Errorf("room prefix with name: %q", got)
	}

	for _, bad := range []string{"{room_id}/{job_id}", "{room_id}/", "{room_id}/{jobid}/", "{room_id}/{job_id}/{room_id}/"} {
		if _, err := NewLayout("", bad); err == nil {
			t.Errorf("template %q accepted", bad)
		} else if !strings.Contains(err.Error(), "key template") {
			t.Errorf("template %q: unclear error %v", bad, err)
		}
	}
}
