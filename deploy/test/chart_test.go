package test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/wire"
)

var update = flag.Bool("update", false, "rewrite deploy/manifests from the chart")

const chart = "../helm/lkscore"

// helmBin finds helm; CI installs it (LKSCORE_REQUIRE_HELM=1 makes its
// absence a failure instead of a loud skip).
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "helm")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	msg := "helm not found: go install helm.sh/helm/v3/cmd/helm@v3.22.0"
	if os.Getenv("LKSCORE_REQUIRE_HELM") != "" || os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING CHART TESTS: " + msg)
	return ""
}

func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

func render(t *testing.T, valuesFile string) []byte {
	t.Helper()
	args := []string{"template", "lkscore", chart, "--namespace", "lkscore"}
	if valuesFile != "" {
		args = append(args, "-f", valuesFile)
	}
	return helm(t, args...)
}

// docs splits a multi-document YAML stream.
func docs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("\n---")) {
		d = bytes.TrimSpace(d)
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func stripComments(b []byte) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}

// scaledObject and serviceMonitor mirror the CRD fields the chart uses, for
// strict decoding (client-go's scheme does not know these kinds).
type scaledObject struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   map[string]any   `json:"metadata"`
	Spec       scaledObjectSpec `json:"spec"`
}

type scaledObjectSpec struct {
	ScaleTargetRef struct {
		Name string `json:"name"`
	} `json:"scaleTargetRef"`
	MinReplicaCount int `json:"minReplicaCount"`
	MaxReplicaCount int `json:"maxReplicaCount"`
	PollingInterval int `json:"pollingInterval"`
	CooldownPeriod  int `json:"cooldownPeriod"`
	Fallback        struct {
		FailureThreshold int `json:"failureThreshold"`
		Replicas         int `json:"replicas"`
	} `json:"fallback"`
	Triggers []struct {
		Type     string            `json:"type"`
		Metadata map[string]string `json:"metadata"`
	} `json:"triggers"`
}

type serviceMonitor struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func strictJSON(t *testing.T, doc []byte, into any) {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("strict decode: %v\n%s", err, doc)
	}
}

// rendered is one render, decoded.
type rendered struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	config      string
	scaled      []scaledObject
	monitors    []serviceMonitor
	kinds       []string
}

func decodeAll(t *testing.T, out []byte) rendered {
	t.Helper()
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	r := rendered{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}}
	for _, d := range docs(out) {
		var meta struct{ Kind, APIVersion string }
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, d)
		}
		r.kinds = append(r.kinds, meta.Kind)
		switch meta.Kind {
		case "ScaledObject":
			var so scaledObject
			strictJSON(t, d, &so)
			r.scaled = append(r.scaled, so)
			continue
		case "ServiceMonitor":
			var sm serviceMonitor
			strictJSON(t, d, &sm)
			r.monitors = append(r.monitors, sm)
			continue
		}
		obj, _, err := dec.Decode(d, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *corev1.ConfigMap:
			r.config = o.Data["config.yaml"]
		}
		var _ runtime.Object = obj
	}
	return r
}

var valueFiles = map[string]string{"default": "", "production": chart + "/values-production.yaml"}

func TestChart(t *testing.T) {
	bin := buildBinary(t)
	help, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	for name, vf := range valueFiles {
		t.Run(name, func(t *testing.T) {
			lint := []string{"lint", "--strict", chart}
			if vf != "" {
				lint = append(lint, "-f", vf)
			}
			helm(t, lint...)
			r := decodeAll(t, render(t, vf))
			checkChart(t, r, string(help))
			if name == "production" && (len(r.scaled) != 1 || len(r.monitors) != 1) {
				t.Errorf("production renders %d ScaledObjects and %d ServiceMonitors, want 1 and 1", len(r.scaled), len(r.monitors))
			}
		})
	}
	t.Run("hpa instead of keda", func(t *testing.T) {
		out := helm(t, "template", "lkscore", chart, "--set", "s3.bucket=b", "--set", "worker.autoscaling.hpa.enabled=true")
		r := decodeAll(t, out)
		if !strings.Contains(strings.Join(r.kinds, ","), "HorizontalPodAutoscaler") || r.deployments["lkscore-worker"].Spec.Replicas != nil {
			t.Errorf("hpa: kinds %v", r.kinds)
		}
	})
}

// TestChartValues: GOMEMLIMIT from any Kubernetes quantity (unset without a
// memory limit), the schema rejects unknown keys, autoscaling without a
// shared store is refused, and the image digest, extra env and volumes and the
// dashboard token reach the pod.
func TestChartValues(t *testing.T) {
	// The optional Grafana dashboard and PrometheusRule lint with the rest
	// (TestChartAsProcesses checks their queries against running workloads).
	helm(t, "lint", "--strict", chart, "--set", "grafanaDashboard.enabled=true", "--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.labels.release=prometheus")
	for q, want := range map[string]string{"1G": "900000000", "512M": "460800000", "1.5Gi": "1449551462", "2Gi": "1932735283", "268435456": "241591910"} {
		r := decodeAll(t, helm(t, "template", "lkscore", chart, "--set", "all.resources.limits.memory="+q))
		if got := envOf(r.deployments["lkscore-all"], "GOMEMLIMIT"); got != want {
			t.Errorf("limits.memory %s: GOMEMLIMIT %q, want %s", q, got, want)
		}
	}
	r := decodeAll(t, helm(t, "template", "lkscore", chart, "--set", "all.resources=null"))
	if got, ok := envOfOK(r.deployments["lkscore-all"], "GOMEMLIMIT"); ok {
		t.Errorf("no memory limit: GOMEMLIMIT %q, want unset", got)
	}
	for _, bad := range [][]string{{"--set", "workr.replicas=2"}, {"--set", "all.resources.limits.memory=lots"},
		{"--set", "worker.autoscaling.keda.enabled=true"}, {"--set", "image.digest=latest"}} {
		if out, err := helmErr(t, append([]string{"template", "lkscore", chart}, bad...)...); err == nil {
			t.Errorf("helm template %v renders; want it refused:\n%.300s", bad, out)
		}
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	r = decodeAll(t, helm(t, "template", "lkscore", chart, "--set", "image.digest="+digest, "--set", "dashboard.token=t0ken",
		"--set", "extraEnv[0].name=FOO", "--set", "extraEnv[0].value=bar",
		"--set", "extraVolumes[0].name=x", "--set", "extraVolumes[0].emptyDir.medium=Memory",
		"--set", "extraVolumeMounts[0].name=x", "--set", "extraVolumeMounts[0].mountPath=/x"))
	pod := r.deployments["lkscore-all"].Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "ghcr.io/lkscore/lkscore@"+digest || envOf(r.deployments["lkscore-all"], "FOO") != "bar" {
		t.Errorf("image %s, FOO %q", c.Image, envOf(r.deployments["lkscore-all"], "FOO"))
	}
	tok := false
	for _, e := range c.Env {
		tok = tok || (e.Name == "LKSCORE_DASHBOARD_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name == "lkscore-dashboard")
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "x" && m.MountPath == "/x")
	}
	if !tok || !mounted || pod.Volumes[len(pod.Volumes)-1].Name != "x" {
		t.Errorf("dashboard token %v, extra mount %v, volumes %v", tok, mounted, pod.Volumes)
	}
}

func envOfOK(d *appsv1.Deployment, name string) (string, bool) {
	if d == nil {
		return "", false
	}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func envOf(d *appsv1.Deployment, name string) string { v, _ := envOfOK(d, name); return v }

// helmErr runs helm and returns its error instead of failing.
func helmErr(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	return cmd.CombinedOutput()
}

// checkChart asserts what strict decoding cannot: that the objects fit
// together and fit the binary.
func checkChart(t *testing.T, r rendered, serveHelp string) {
	t.Helper()
	// The rendered config is one lkscore itself accepts (strict YAML, validated).
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(r.config), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgFile, func(k string) string {
		return map[string]string{"LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "s"}[k]
	}, nil)
	if err != nil {
		t.Fatalf("lkscore rejects the chart's config: %v\n%s", err, r.config)
	}
	// Ingest and workers apart only with a store they share (S3); else one
	// --role all pod on a volume.
	wantRoles := map[string]bool{"all": true}
	if cfg.S3.Bucket != "" {
		wantRoles = map[string]bool{"ingest": true, "worker": true}
	}
	if len(r.deployments) != len(wantRoles) {
		t.Fatalf("%d deployments, want %v", len(r.deployments), wantRoles)
	}
	for name, d := range r.deployments {
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		role := ""
		for i, a := range c.Args {
			if strings.HasPrefix(a, "--") && !strings.Contains(serveHelp, a) {
				t.Errorf("%s: flag %s is not a flag of lkscore serve", name, a)
			}
			if a == "--role" && i+1 < len(c.Args) {
				role = c.Args[i+1]
			}
		}
		if !strings.HasSuffix(name, "-"+role) || !wantRoles[role] {
			t.Errorf("%s runs --role %q", name, role)
		}
		if role == "all" && (d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType) {
			t.Errorf("%s: the single pod on a data dir must be 1 replica, Recreate: %v %v", name, d.Spec.Replicas, d.Spec.Strategy.Type)
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		if ports["ops"] != 9090 || cfg.OpsListen != ":9090" {
			t.Errorf("%s: ops port %d, config ops_listen %q", name, ports["ops"], cfg.OpsListen)
		}
		if role != "worker" && (ports["http"] != 8080 || cfg.Listen != ":8080") {
			t.Errorf("%s: http port %d, config listen %q", name, ports["http"], cfg.Listen)
		}
		for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "ops" {
				t.Errorf("%s: probe %+v, want %s on ops", name, probe, want)
			}
		}
		mem := c.Resources.Limits.Memory()
		gomem := ""
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				gomem = e.Value
			}
		}
		if mem.IsZero() || gomem != strconv.FormatInt(mem.Value()*9/10, 10) {
			t.Errorf("%s: memory limit %v, GOMEMLIMIT %q: want 90%% of the limit", name, mem, gomem)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: container securityContext %+v", name, sc)
		}
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod securityContext %+v", name, psc)
		}
		if grace := pod.TerminationGracePeriodSeconds; grace == nil || time.Duration(*grace)*time.Second <= cfg.ShutdownTimeout {
			t.Errorf("%s: terminationGracePeriodSeconds %v not above shutdown_timeout %s", name, grace, cfg.ShutdownTimeout)
		}
		if !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("%s: selector %v does not match pod labels %v", name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
		covered := false
		for _, p := range r.pdbs {
			covered = covered || subset(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
		if !covered {
			t.Errorf("%s: no PodDisruptionBudget selects its pods", name)
		}
	}
	svc := r.services["lkscore"]
	for name, d := range r.deployments {
		serves := !strings.HasSuffix(name, "-worker")
		if svc == nil || subset(svc.Spec.Selector, d.Spec.Template.Labels) != serves {
			t.Errorf("the Service must select the pods that serve webhooks and uploads (%s: %v): %+v", name, serves, svc)
		}
	}
	subjects := wire.NewSubjects(cfg.NATS.SubjectPrefix, cfg.NATS.StreamPrefix)
	for _, so := range r.scaled {
		if so.Spec.ScaleTargetRef.Name != "lkscore-worker" || so.Spec.Fallback.Replicas < 1 || so.Spec.Fallback.FailureThreshold < 1 {
			t.Errorf("ScaledObject %+v", so.Spec)
		}
		tr := so.Spec.Triggers[0]
		// The consumer the workers create, named by the code that creates it.
		if tr.Type != "nats-jetstream" || tr.Metadata["stream"] != subjects.SessionStream() || tr.Metadata["consumer"] != wire.ScoreConsumer(cfg.Pipeline.Pool) {
			t.Errorf("ScaledObject trigger %+v, want stream %s consumer %s", tr, subjects.SessionStream(), wire.ScoreConsumer(cfg.Pipeline.Pool))
		}
	}
	for _, sm := range r.monitors {
		ops := r.services["lkscore-ops"]
		if ops == nil || !subset(sm.Spec.Selector.MatchLabels, ops.Labels) || sm.Spec.Endpoints[0].Port != "ops" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor %+v does not scrape the ops Service", sm.Spec)
		}
	}
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestManifestsInSync: deploy/manifests holds the chart rendered with its
// default values, for users without Helm; it must not drift.
func TestManifestsInSync(t *testing.T) {
	got := append([]byte("# Rendered from deploy/helm/lkscore with its default values:\n#   helm template lkscore deploy/helm/lkscore --namespace lkscore\n# Do not edit: go test ./... -update in deploy/test regenerates it.\n"), render(t, "")...)
	path := "../manifests/lkscore.yaml"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with the chart: run `go test ./... -update` in deploy/test", path)
	}
}

// TestChartNetworkPolicy: with the NetworkPolicy on (as the production
// values have it), every egress rule names where it goes: DNS in
// kube-system, NATS in its namespace, each alert target's pods on its port
// (Alertmanager's 9093), HTTPS to the configured CIDRs. No rule opens a port
// to any destination, and the alert targets are reachable.
func TestChartNetworkPolicy(t *testing.T) {
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	out := helm(t, "template", "lkscore", chart, "-f", chart+"/values-production.yaml",
		"--set", "networkPolicy.egress.httpsCIDRs[0]=10.20.0.0/16")
	var np *networkingv1.NetworkPolicy
	for _, d := range docs(out) {
		if obj, _, err := dec.Decode(d, nil, nil); err == nil {
			if p, ok := obj.(*networkingv1.NetworkPolicy); ok {
				np = p
			}
		}
	}
	if np == nil {
		t.Fatal("the production values render no NetworkPolicy")
	}
	alert, https := false, false
	for i, rule := range np.Spec.Egress {
		if len(rule.To) == 0 {
			t.Errorf("egress rule %d goes to any destination: %+v", i, rule.Ports)
		}
		for _, p := range rule.Ports {
			if p.Port.IntValue() == 80 {
				t.Errorf("egress rule %d opens port 80", i)
			}
			for _, to := range rule.To {
				if p.Port.IntValue() == 9093 && to.PodSelector != nil && to.PodSelector.MatchLabels["app.kubernetes.io/name"] == "alertmanager" &&
					to.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "monitoring" {
					alert = true
				}
				if p.Port.IntValue() == 443 && to.IPBlock != nil && to.IPBlock.CIDR == "10.20.0.0/16" {
					https = true
				}
			}
		}
	}
	if !alert || !https {
		t.Errorf("Alertmanager on 9093 reachable: %v; HTTPS to the configured CIDR: %v\n%s", alert, https, out)
	}
}
