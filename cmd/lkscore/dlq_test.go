package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

func TestDLQListAndReplay(t *testing.T) {
	ns := testenv.StartNATS(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := config.Default()
	subj := wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix)
	if err := broker.EnsureStreams(context.Background(), js, subj, cfg, nil); err != nil {
		t.Fatal(err)
	}
	// A dead letter as the score stage writes it.
	msg := nats.NewMsg(subj.DLQ(wire.StageScore))
	msg.Data = []byte(`{"session_key":"RM_a/AJ_b"}`)
	for k, v := range map[string]string{wire.HeaderDLQStage: "score", wire.HeaderDLQError: "chat_history: item 3: unexpected EOF",
		wire.HeaderDLQSubject: subj.Session("CR_COMPLETED"), wire.HeaderDLQStream: subj.SessionStream(), wire.HeaderDLQSeq: "7",
		wire.HeaderDLQDeliveries: "1", wire.HeaderSessionKey: "RM_a/AJ_b", wire.HeaderDLQMsgID: "RM_a/AJ_b"} {
		msg.Header.Set(k, v)
	}
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	dlq := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"lkscore", "dlq"}, append(args, "--nats-url", ns.URL())...), func(string) string { return "" }, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, stderr := dlq("list")
	if code != 0 || !strings.Contains(out, "chat_history: item 3: unexpected EOF") || !strings.Contains(out, "RM_a/AJ_b") {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := dlq("list", "--stage", "locate"); code != 0 || strings.Contains(out, "RM_a/AJ_b") {
		t.Fatalf("stage filter: %d\n%s", code, out)
	}
	if code, _, stderr := dlq("replay", "--seq", "999"); code != 1 || !strings.Contains(stderr, "no dead letter 999") {
		t.Errorf("replay of a missing dead letter: exit %d %s", code, stderr)
	}
	if code, _, stderr := dlq("replay"); code != 2 {
		t.Fatalf("replay without --seq or --all: exit %d %s", code, stderr)
	}
	if code, out, stderr := dlq("replay", "--all"); code != 0 || !strings.Contains(out, "replayed 1") {
		t.Fatalf("replay: exit %d %s %s", code, out, stderr)
	}
	s, _ := js.Stream(context.Background(), subj.SessionStream())
	m, err := s.GetLastMsgForSubject(context.Background(), subj.Session("CR_COMPLETED"))
	if err != nil || string(m.Data) != `{"session_key":"RM_a/AJ_b"}` || m.Header.Get(wire.HeaderDLQError) != "" || m.Header.Get("Lk-Replayed-From") != "1" {
		t.Fatalf("replayed message: %v %+v", err, m)
	}
	if _, out, _ := dlq("list", "--json"); strings.TrimSpace(out) != "" {
		t.Fatalf("dead letter still listed after replay: %s", out)
	}
}
