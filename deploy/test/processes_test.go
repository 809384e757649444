package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/lkscore/lkscore/internal/testenv"
)

const (
	procKey    = "chart-key"
	procSecret = "chart-secret-0123456789abcdef"
)

// TestChartAsProcesses: the chart's rendered workloads, run as local
// processes the way Kubernetes would run their pods: each Deployment's
// command, args, env (Secrets resolved) and ConfigMap, each pod with its own
// directories for its volumes (a PVC or an emptyDir is a directory of that
// pod; nothing is shared that Kubernetes would not share), its own address.
// A real NATS server and, for the production example, a real S3 stand-in
// (versitygw) replace the cluster's. `lkscore bench` then sends signed
// sessions (upload and agent_job_ended) to the ingest endpoint, as agents and
// LiveKit would, and reads the scorecards from NATS: every session is scored
// exactly once.
func TestChartAsProcesses(t *testing.T) {
	bin := buildBinary(t)
	for _, name := range []string{"default", "production"} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.StartNATS(t)
			secrets := map[string]map[string]string{
				"lkscore-livekit": {"LIVEKIT_API_KEY": procKey, "LIVEKIT_API_SECRET": procSecret},
			}
			args := []string{"template", "lkscore", chart, "--namespace", "lkscore", "--set", "nats.url=" + ns.URL()}
			env := []string{}
			if name == "production" {
				s3 := testenv.StartS3(t)
				s3.CreateBucket(t, "acme-agent-recordings")
				// The stand-ins: versitygw for S3 (static keys instead of IRSA), a
				// single NATS server without credentials.
				args = append(args, "-f", valueFiles[name], "--set", "s3.endpoint="+s3.Endpoint, "--set", "s3.forcePathStyle=true",
					"--set", "s3.existingSecret=aws", "--set", "s3.region=us-east-1", "--set", "nats.auth.existingSecret=", "--set", "nats.auth.credsKey=",
					"--set", "nats.streamReplicas=1", "--set", "config.nats.max_bytes=268435456") // the test server's disk, not 20 GiB
				secrets["aws"] = map[string]string{"AWS_ACCESS_KEY_ID": testenv.S3AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.S3SecretKey}
				env = append(env, "AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=us-east-1")
			}
			r := decodeAll(t, helm(t, args...))
			var ingest []string
			var pods []pod
			names := make([]string, 0, len(r.deployments))
			for n := range r.deployments {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				d := r.deployments[n]
				replicas := 1
				if d.Spec.Replicas != nil {
					replicas = min(int(*d.Spec.Replicas), 2) // two pods show what one would not
				}
				for i := range replicas {
					p := runPod(t, bin, fmt.Sprintf("%s-%d", n, i), d, r.config, secrets, env)
					pods = append(pods, p)
					if p.serves {
						ingest = append(ingest, p.http)
					}
				}
			}
			if len(ingest) == 0 {
				t.Fatal("no workload serves webhooks and uploads")
			}
			// Sessions to one ingest pod (a Service would spread them; one is enough to
			// show an upload stored by one pod is scored by another).
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			bench := exec.CommandContext(ctx, bin, "bench", "--url", "http://"+ingest[0], "--sessions", "24", "--concurrency", "4",
				"--nats-url", ns.URL(), "--timeout", "60s")
			bench.Env = append(os.Environ(), "LIVEKIT_API_KEY="+procKey, "LIVEKIT_API_SECRET="+procSecret)
			out, err := bench.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "lost 0, duplicated 0, refused 0") {
				t.Fatalf("bench against the chart's workloads: %v\n%s", err, out)
			}
			t.Logf("%s: %s", name, strings.TrimSpace(string(out)))
			checkObservability(t, append(args, "--set", "grafanaDashboard.enabled=true", "--set", "prometheusRule.enabled=true"), pods, 24)
		})
	}
}

// promRule is the part of a PrometheusRule the test reads (strictly).
type promRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

var metricName = regexp.MustCompile(`\blkscore_[a-z0-9_]+`)

// checkObservability: the chart's Grafana dashboard and PrometheusRule name
// only metrics the running workloads expose (a scrape of each pod's
// /metrics), and the quality metrics counted every scorecard once.
func checkObservability(t *testing.T, renderArgs []string, pods []pod, scorecards int) {
	t.Helper()
	scraped := map[string]bool{}
	counted := 0.0
	for _, p := range pods {
		resp, err := http.Get("http://" + p.ops + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name := line[:strings.IndexAny(line, "{ ")]
			scraped[name] = true
			if name == "lkscore_scorecards_total" {
				var v float64
				_, _ = fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v)
				counted += v
			}
		}
	}
	if int(counted) != scorecards {
		t.Errorf("lkscore_scorecards_total sums to %v over the pods, want %d", counted, scorecards)
	}
	var exprs []string
	rules := 0
	for _, d := range docs(helm(t, renderArgs...)) {
		var meta struct{ Kind string }
		_ = yaml.Unmarshal(d, &meta)
		switch meta.Kind {
		case "PrometheusRule":
			var pr promRule
			strictJSON(t, d, &pr)
			for _, g := range pr.Spec.Groups {
				for _, r := range g.Rules {
					rules++
					if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
						t.Errorf("rule %+v lacks an alert name, severity or summary", r)
					}
					exprs = append(exprs, r.Expr)
				}
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal(d, &cm); err != nil {
				t.Fatal(err)
			}
			raw, ok := cm.Data["lkscore.json"]
			if !ok {
				continue
			}
			var dash struct {
				Panels []struct {
					Type    string `json:"type"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			if err := json.Unmarshal([]byte(raw), &dash); err != nil {
				t.Fatalf("the Grafana dashboard is not JSON: %v", err)
			}
			for _, p := range dash.Panels {
				for _, tg := range p.Targets {
					exprs = append(exprs, tg.Expr)
				}
			}
		}
	}
	if rules < 5 || len(exprs) < rules+10 {
		t.Fatalf("%d rules and %d expressions rendered", rules, len(exprs))
	}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			if !scraped[m] {
				t.Errorf("%q names %s, which no running workload exposes", e, m)
			}
		}
	}
}

// pod is one workload replica run as a process.
type pod struct {
	http   string // its webhook/upload address, when it serves them
	ops    string // its /healthz, /readyz, /metrics address
	serves bool
}

// runPod runs one replica of d: its container's args and env, its volumes as
// directories of its own, its ConfigMap's config with mount paths mapped.
func runPod(t *testing.T, bin, name string, d *appsv1.Deployment, config string, secrets map[string]map[string]string, extraEnv []string) pod {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	root := t.TempDir()
	mounts := map[string]string{} // mount path → directory
	for _, m := range c.VolumeMounts {
		host := filepath.Join(root, m.MountPath)
		if m.Name == "config" {
			if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
				t.Fatal(err)
			}
			continue // written below, once the paths in it are mapped
		}
		if err := os.MkdirAll(host, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts[m.MountPath] = host
	}
	// The config file, its paths moved into this pod's directories.
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatal(err)
	}
	mapPaths(cfg, mounts)
	cfgYAML, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(root, "etc/lkscore/config.yaml")
	if err := os.WriteFile(cfgPath, cfgYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(c.Args)
	for i, a := range args {
		if a == "/etc/lkscore/config.yaml" {
			args[i] = cfgPath
		}
	}
	// The container's env, Secrets resolved as the kubelet would.
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}, extraEnv...)
	for _, e := range c.Env {
		v := e.Value
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			s, ok := secrets[ref.SecretKeyRef.Name][ref.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("%s: env %s needs Secret %s key %s", name, e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
			}
			v = s
		}
		env = append(env, e.Name+"="+v)
	}
	for _, from := range c.EnvFrom {
		if from.SecretRef != nil {
			for k, v := range secrets[from.SecretRef.Name] {
				env = append(env, k+"="+v)
			}
		}
	}
	// Its own addresses, as a pod has its own IP: the ports stay the chart's.
	p := pod{serves: hasPort(c, "http")}
	p.ops, p.http = freeAddr(t), freeAddr(t)
	env = append(env, "LKSCORE_LISTEN="+p.http, "LKSCORE_OPS_LISTEN="+p.ops)
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = env, root
	var log testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("--- %s (%s) log ---\n%s", name, strings.Join(c.Args, " "), tail(log.String(), 3000))
		}
	})
	// The readiness probe's path and port.
	probe := "http://" + p.ops + c.ReadinessProbe.HTTPGet.Path
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(probe); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %v\n%s", name, waitErr, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready:\n%s", name, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mapPaths rewrites every string of the config that lies under a mount path
// to the pod's directory for it.
func mapPaths(v any, mounts map[string]string) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, x := range m {
		switch val := x.(type) {
		case string:
			for path, dir := range mounts {
				if val == path || strings.HasPrefix(val, path+"/") {
					m[k] = dir + strings.TrimPrefix(val, path)
				}
			}
		case map[string]any:
			mapPaths(val, mounts)
		}
	}
}

func hasPort(c corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
}

func freeAddr(t *testing.T) string { return testenv.FreeAddr(t) }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
