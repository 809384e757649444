package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// renderNotes renders the chart's NOTES.txt with sets applied, as
// `helm install` would print it: helm template skips NOTES.txt, so a copy
// of the chart renders it through tpl in a manifest of its own.
func renderNotes(t *testing.T, sets ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lkscore")
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := `notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "lkscore", dir, "--namespace", "lkscore", "--show-only", "templates/zz-notes.yaml"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	var doc struct{ Notes string }
	if err := yaml.Unmarshal(helm(t, args...), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Notes
}

// TestNotesAgreeWithChart: what helm install prints after an install says
// what the chart's templates do: the Secret the pods read their LiveKit key
// from (and how to create it, when the chart does not), how to reach the
// dashboard on the ops Service, and the ports the NetworkPolicy opens.
func TestNotesAgreeWithChart(t *testing.T) {
	def := renderNotes(t)
	for _, want := range []string{"Secret lkscore-livekit", "kubectl -n lkscore create secret generic lkscore-livekit",
		"--from-literal=LIVEKIT_API_KEY=", "port-forward svc/lkscore-ops 9090:9090", "http://127.0.0.1:9090/ui",
		"not an image published for you"} {
		if !strings.Contains(def, want) {
			t.Errorf("default install notes lack %q:\n%s", want, def)
		}
	}
	if strings.Contains(def, "NetworkPolicy") {
		t.Error("notes describe a NetworkPolicy the default install does not create")
	}
	// The Secret the notes name is the one the pods read.
	pods := string(helm(t, "template", "lkscore", chart, "--namespace", "lkscore"))
	if !strings.Contains(pods, "secretKeyRef: {name: lkscore-livekit, key: LIVEKIT_API_KEY}") {
		t.Error("the pods do not read the Secret the notes name")
	}
	if own := renderNotes(t, "image.repository=registry.example.com/lkscore"); strings.Contains(own, "not an image published") {
		t.Error("the image hint stays when the user set their own image")
	}
	ext := renderNotes(t, "livekit.existingSecret=my-keys")
	if !strings.Contains(ext, "Secret my-keys") || strings.Contains(ext, "create secret") {
		t.Errorf("with livekit.existingSecret the notes must name it and not ask to create one:\n%s", ext)
	}
	np := renderNotes(t, "networkPolicy.enabled=true", "networkPolicy.opsFromNamespaces={monitoring}")
	for _, want := range []string{"ingress on 8080", "on 9090 from namespaces monitoring", "NATS in namespace nats on 4222"} {
		if !strings.Contains(np, want) {
			t.Errorf("NetworkPolicy notes lack %q:\n%s", want, np)
		}
	}
	policy := string(helm(t, "template", "lkscore", chart, "--namespace", "lkscore", "--set", "networkPolicy.enabled=true",
		"--set", "networkPolicy.opsFromNamespaces={monitoring}", "--show-only", "templates/networkpolicy.yaml"))
	for _, port := range []string{"port: 8080", "port: 9090", "port: 4222"} {
		if !strings.Contains(policy, port) {
			t.Errorf("the NetworkPolicy has no %s, which the notes name", port)
		}
	}
}
