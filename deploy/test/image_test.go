package test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const dockerfile = "../../Dockerfile"

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildBinary runs the Dockerfile's own `go build` line (flags, ldflags and
// all), with only the output path and VERSION=test substituted.
func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		f, err := os.Open(dockerfile)
		if err != nil {
			buildErr = err
			return
		}
		defer f.Close()
		var line string
		for sc := bufio.NewScanner(f); sc.Scan(); {
			if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "RUN CGO_ENABLED=0 go build") {
				line = strings.TrimPrefix(l, "RUN ")
			}
		}
		if line == "" || !strings.Contains(line, "-trimpath") || !strings.Contains(line, "-o /out/lkscore") {
			buildErr = fmt.Errorf("no `RUN CGO_ENABLED=0 go build -trimpath … -o /out/lkscore` line in the Dockerfile")
			return
		}
		dir, err := os.MkdirTemp("", "lkscore-image")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "lkscore")
		cmdline := strings.ReplaceAll(strings.ReplaceAll(line, "${VERSION}", "test"), "-o /out/lkscore", "-o "+builtBin)
		cmd := exec.Command("sh", "-c", cmdline)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%s: %v\n%s", cmdline, err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestImageBinary: the binary the Dockerfile builds is static, carries its
// version, starts on the embedded default and answers /healthz, and stops
// cleanly on SIGTERM.
func TestImageBinary(t *testing.T) {
	bin := buildBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has a dynamic loader: CGO_ENABLED=0 did not take")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary links %v", libs)
	}
	f.Close()
	if out, _ := exec.Command(bin, "--version").Output(); !strings.Contains(string(out), "test") {
		t.Errorf("--version prints %q: the ldflags version stamp is missing", out)
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	_ = os.WriteFile(cfg, []byte("nats:\n  embedded_port: -1\n"), 0o600)
	ops := freePort(t)
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "LIVEKIT_API_KEY=k", "LIVEKIT_API_SECRET=s", "LKSCORE_DATA_DIR="+dir+"/data",
		fmt.Sprintf("LKSCORE_LISTEN=127.0.0.1:%d", freePort(t)), fmt.Sprintf("LKSCORE_OPS_LISTEN=127.0.0.1:%d", ops))
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", ops))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("not ready; logs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", ops)); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v", err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after SIGTERM")
	}
}

// TestImageBuildah builds the Dockerfile's final stage (FROM scratch) on the
// binary above with buildah, where it is installed, and runs it.
func TestImageBuildah(t *testing.T) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		t.Skip("SKIPPING IMAGE BUILD: buildah not installed (apt-get install buildah)")
	}
	ca := "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(ca); err != nil {
		t.Skip("SKIPPING IMAGE BUILD: no " + ca)
	}
	bin := buildBinary(t)
	ctx := t.TempDir()
	copyFile(t, bin, filepath.Join(ctx, "lkscore"))
	copyFile(t, ca, filepath.Join(ctx, "ca-certificates.crt"))
	_ = os.WriteFile(filepath.Join(ctx, "passwd"), []byte("nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n"), 0o644)
	_ = os.WriteFile(filepath.Join(ctx, "group"), []byte("nonroot:x:65532:\n"), 0o644)
	// The final stage, with its COPY --from=build sources taken from ctx.
	src, _ := os.ReadFile(dockerfile)
	stage := string(src[strings.Index(string(src), "FROM scratch"):])
	for from, to := range map[string]string{
		"COPY --from=build /etc/ssl/certs/ca-certificates.crt ": "COPY ca-certificates.crt ",
		"COPY --from=build /out/passwd ":                        "COPY passwd ",
		"COPY --from=build /out/group ":                         "COPY group ",
		"COPY --from=build /out/lkscore ":                       "COPY lkscore ",
	} {
		if !strings.Contains(stage, from) {
			t.Fatalf("the final stage lacks %q", from)
		}
		stage = strings.ReplaceAll(stage, from, to)
	}
	if strings.Contains(stage, "--from=") {
		t.Fatalf("unexpected COPY --from in the final stage:\n%s", stage)
	}
	_ = os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(stage), 0o644)
	tag := fmt.Sprintf("localhost/lkscore-test:%d", time.Now().UnixNano())
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(buildah, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("bud", "--isolation", "chroot", "--build-arg", "VERSION=test", "-t", tag, "-f", filepath.Join(ctx, "Containerfile"), ctx)
	defer exec.Command(buildah, "rmi", "-f", tag).Run()
	var img struct {
		OCIv1 struct {
			Config struct {
				User       string   `json:"User"`
				Entrypoint []string `json:"Entrypoint"`
			} `json:"config"`
		} `json:"OCIv1"`
	}
	if err := json.Unmarshal([]byte(run("inspect", "--type", "image", tag)), &img); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if c := img.OCIv1.Config; c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/lkscore" {
		t.Fatalf("image config: user %q entrypoint %v", c.User, c.Entrypoint)
	}
	ctr := run("from", tag)
	defer exec.Command(buildah, "rm", ctr).Run()
	if out := run("run", "--isolation", "chroot", ctr, "--", "/lkscore", "--version"); !strings.Contains(out, "test") {
		t.Fatalf("the image's binary printed %q", out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
