package test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/lkscore/lkscore/internal/testenv"
)

// natsChart is the official NATS chart, 2.14.2, as published (testdata/nats-chart/PROVENANCE.md).
const natsChart = "testdata/nats-chart"

// natsValues are the values the README installs it with.
const natsValues = "../helm/nats-values.yaml"

// wantSync is the sync policy docs/performance.md chose for a cluster ("JetStream's sync policy").
const wantSync = "always"

// TestNATSChartValues: deploy/helm/nats-values.yaml rendered with the
// official NATS chart is a 3-node JetStream cluster on PVCs with the sync
// policy the measurements chose, token authorization from Secret nats-auth,
// resources, and the client and monitoring ports on Service nats in
// namespace nats (the address lkscore's chart defaults to). Its rendered
// nats.conf, run as three real nats-server processes (the pods' names mapped
// to loopback ports, as the cluster's DNS would resolve them), forms a
// cluster that refuses a client without the token; lkscore's chart, given
// the token Secret and 3 stream replicas as the README says, runs its
// workloads against it and scores every session bench sends exactly once.
func TestNATSChartValues(t *testing.T) {
	out := helm(t, "template", "nats", natsChart, "--namespace", "nats", "-f", natsValues)
	var sts appsv1.StatefulSet
	var conf string
	var svc corev1.Service
	for _, d := range docs(out) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "StatefulSet":
			strictJSON(t, d, &sts)
		case "ConfigMap":
			var cm corev1.ConfigMap
			strictJSON(t, d, &cm)
			conf = cm.Data["nats.conf"]
		case "Service":
			var s corev1.Service
			strictJSON(t, d, &s)
			if s.Name == "nats" {
				svc = s
			}
		}
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 || len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("StatefulSet: %+v replicas, %d volume claims", sts.Spec.Replicas, len(sts.Spec.VolumeClaimTemplates))
	}
	c := sts.Spec.Template.Spec.Containers[0]
	var tokenFromSecret bool
	for _, e := range c.Env {
		if e.Name == "NATS_AUTH_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "nats-auth" &&
			e.ValueFrom.SecretKeyRef.Key == "token" {
			tokenFromSecret = true
		}
	}
	if !tokenFromSecret || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("nats container: token from Secret nats-auth %v, resources %+v", tokenFromSecret, c.Resources)
	}
	for _, want := range []string{`"sync_interval": "` + wantSync + `"`, `"token": $NATS_AUTH_TOKEN`, `"store_dir": "/data"`, `"http_port": 8222`} {
		if !strings.Contains(conf, want) {
			t.Errorf("nats.conf lacks %s:\n%s", want, conf)
		}
	}
	ports := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		ports[p.Port] = true
	}
	// Installed with -n nats (the README's line), Service nats is nats.nats.svc.cluster.local.
	if svc.Name != "nats" || !ports[4222] || !ports[8222] {
		t.Errorf("Service %q ports %v: lkscore's chart defaults to nats.nats.svc.cluster.local:4222 and :8222", svc.Name, ports)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil || !strings.Contains(string(readme), "helm install nats nats/nats --version 2.14.2 -n nats -f deploy/helm/nats-values.yaml") {
		t.Errorf("the README's install line for the NATS chart is not the one tested here (%v)", err)
	}
	if testing.Short() {
		t.Skip("-short: the rendered cluster is not run")
	}

	// The rendered nats.conf, run as the three pods.
	bin := filepath.Join(t.TempDir(), "nats-server")
	if b, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, b)
	}
	token := "test-token-0123456789abcdef"
	type node struct{ client, cluster, monitor string }
	nodes := make([]node, 3)
	for i := range nodes {
		nodes[i] = node{testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)}
	}
	port := func(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }
	var urls []string
	for i, n := range nodes {
		dir := t.TempDir()
		c := conf
		for j, m := range nodes { // nats-<j>.nats-headless resolves to pod j
			c = strings.ReplaceAll(c, fmt.Sprintf("nats://nats-%d.nats-headless:6222", j), "nats://"+m.cluster)
		}
		for from, to := range map[string]string{`"store_dir": "/data"`: fmt.Sprintf("%q: %q", "store_dir", filepath.Join(dir, "data")),
			`"pid_file": "/var/run/nats/nats.pid"`: fmt.Sprintf("%q: %q", "pid_file", filepath.Join(dir, "nats.pid")),
			`"port": 4222`:                         `"port": ` + port(n.client), `"port": 6222`: `"port": ` + port(n.cluster), `"http_port": 8222`: `"http_port": ` + port(n.monitor)} {
			if !strings.Contains(c, from) {
				t.Fatalf("nats.conf lacks %s", from)
			}
			c = strings.ReplaceAll(c, from, to)
		}
		c = regexp.MustCompile(`(?m)^(\s*)"port"`).ReplaceAllString(c, `$1"host": "127.0.0.1",`+"\n"+`$1"port"`) // loopback only
		path := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", path)
		cmd.Env = append(os.Environ(), fmt.Sprintf("SERVER_NAME=nats-%d", i), fmt.Sprintf("POD_NAME=nats-%d", i), "NATS_AUTH_TOKEN="+token)
		var log testenv.SyncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("--- nats-%d ---\n%s", i, tail(log.String(), 2000))
			}
		})
		urls = append(urls, "nats://"+n.client)
	}
	for _, n := range nodes {
		testenv.WaitFor(t, 60*time.Second, "nats node "+n.client+" healthy with JetStream", func() bool {
			resp, err := http.Get("http://" + n.monitor + "/healthz")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	if nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without the token was let in")
	}

	// lkscore's chart, wired as the README says.
	lkValues := filepath.Join(t.TempDir(), "values.yaml")
	v := fmt.Sprintf("nats:\n  url: %q\n  streamReplicas: 3\n  auth:\n    existingSecret: lkscore-nats\n    tokenKey: token\n", strings.Join(urls, ","))
	if err := os.WriteFile(lkValues, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	r := decodeAll(t, helm(t, "template", "lkscore", chart, "--namespace", "lkscore", "-f", lkValues))
	secrets := map[string]map[string]string{
		"lkscore-livekit": {"LIVEKIT_API_KEY": procKey, "LIVEKIT_API_SECRET": procSecret},
		"lkscore-nats":    {"token": token},
	}
	lk := buildBinary(t)
	var ingest string
	for n, d := range r.deployments {
		if p := runPod(t, lk, n, d, r.config, secrets, nil); p.serves {
			ingest = p.http
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bench := exec.CommandContext(ctx, lk, "bench", "--url", "http://"+ingest, "--sessions", "24", "--concurrency", "4",
		"--nats-url", strings.Join(urls, ","), "--timeout", "90s")
	bench.Env = append(os.Environ(), "LIVEKIT_API_KEY="+procKey, "LIVEKIT_API_SECRET="+procSecret, "LKSCORE_NATS_TOKEN="+token)
	b, err := bench.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "lost 0, duplicated 0, refused 0") {
		t.Fatalf("bench against lkscore on the chart's NATS: %v\n%s", err, b)
	}
	t.Logf("on the official chart's NATS, rendered and run: %s", strings.TrimSpace(string(b)))
}
