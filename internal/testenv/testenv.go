// Package testenv starts the real servers lkscore's tests run against: an
// embedded NATS server with JetStream and a versitygw S3 gateway, both on
// loopback. Only tests import it.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// NATS is an embedded NATS server that a test can stop and restart on the
// same port with the same store.
type NATS struct {
	t    testing.TB
	dir  string
	port int
	srv  *server.Server
	// maxPayload is the server's max_payload (0: its default, 1 MiB).
	maxPayload int32
}

// StartNATS starts an embedded JetStream server on a random loopback port,
// stopped at cleanup.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	return StartNATSMaxPayload(t, 0)
}

// StartNATSMaxPayload is StartNATS with the server's max_payload set to
// maxPayload bytes (0: the default).
func StartNATSMaxPayload(t testing.TB, maxPayload int32) *NATS {
	t.Helper()
	n := &NATS{t: t, dir: t.TempDir(), port: -1, maxPayload: maxPayload}
	n.Start()
	t.Cleanup(n.Stop)
	return n
}

// Start (re)starts the server on its port and store.
func (n *NATS) Start() {
	n.t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.dir, NoLog: true, NoSigs: true,
		MaxPayload: n.maxPayload,
	})
	if err != nil {
		n.t.Fatalf("nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats server not ready")
	}
	n.srv = s
	n.port = s.Addr().(*net.TCPAddr).Port
}

// Msgs is the server's count of messages in (from clients) and out (to
// clients) since it started, as its /varz reports them.
func (n *NATS) Msgs() (in, out int64) {
	v, err := n.srv.Varz(nil)
	if err != nil {
		n.t.Fatalf("varz: %v", err)
	}
	return v.InMsgs, v.OutMsgs
}

// ConsumersIdle reports whether every JetStream consumer on the server has
// nothing pending and nothing unacknowledged. It asks the server in-process,
// so it sends no message (a test counting messages can poll it).
func (n *NATS) ConsumersIdle() bool {
	jsz, err := n.srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true})
	if err != nil {
		n.t.Fatalf("jsz: %v", err)
	}
	for _, acc := range jsz.AccountDetails {
		for _, st := range acc.Streams {
			for _, c := range st.Consumer {
				if c.NumPending > 0 || c.NumAckPending > 0 {
					return false
				}
			}
		}
	}
	return true
}

// Stop shuts the server down; it is a no-op when stopped.
func (n *NATS) Stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// URL is the client URL.
func (n *NATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// S3 credentials of the test gateway.
const (
	S3AccessKey = "AKLKSCORETEST"
	S3SecretKey = "lkscore-test-secret-key-0123456789"
)

// S3 is a real versitygw S3 gateway over a temp directory (docs/development.md).
type S3 struct {
	Endpoint string
	Dir      string
	// VersionsDir is where the gateway keeps object versions ("" when it
	// was started without versioning support: StartS3Versioned).
	VersionsDir string
	bin         string
	addr        string
	cmd         *exec.Cmd
}

// versitygwPath finds the binary. CI installs it; LKSCORE_REQUIRE_S3 or CI
// set turn its absence into a failure instead of a loud skip.
func versitygwPath(t testing.TB) string {
	t.Helper()
	return toolPath(t, "versitygw", "install it with `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`",
		"LKSCORE_REQUIRE_S3", "SKIPPING S3 TESTS")
}

// toolPath finds a test's server binary on PATH or in GOPATH/bin. Without
// it the test skips with skip and how to install it, or fails when
// requireEnv or CI is set.
func toolPath(t testing.TB, bin, install, requireEnv, skip string) string {
	t.Helper()
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", bin)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	msg := bin + " not found: " + install
	if os.Getenv(requireEnv) != "" || os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(skip + ": " + msg)
	return ""
}

// StartS3 starts versitygw on a free loopback port, killed at cleanup.
// Buckets are directories under Dir.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	return startS3(t, "")
}

func startS3(t testing.TB, versionsDir string) *S3 {
	t.Helper()
	bin := versitygwPath(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := &S3{Endpoint: "http://" + addr, Dir: t.TempDir(), VersionsDir: versionsDir, bin: bin, addr: addr}
	t.Cleanup(s.Stop)
	s.Start(t)
	return s
}

// StartS3Versioned is StartS3 with versioning support (versitygw's
// --versioning-dir); a bucket keeps versions once EnableVersioning turns
// it on, as an S3 bucket does.
func StartS3Versioned(t testing.TB) *S3 {
	t.Helper()
	return startS3(t, t.TempDir())
}

// Client is an S3 client of the gateway, as the test's own.
func (s *S3) Client() *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(S3AccessKey, S3SecretKey, ""),
	})
}

// EnableVersioning turns a bucket's versioning on.
func (s *S3) EnableVersioning(t testing.TB, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("enable versioning on %s: %v", bucket, err)
	}
}

// Start starts a stopped gateway again, on the same address and directory.
func (s *S3) Start(t testing.TB) {
	t.Helper()
	if s.cmd != nil {
		return
	}
	args := []string{"--access", S3AccessKey, "--secret", S3SecretKey, "--port", s.addr, "posix"}
	if s.VersionsDir != "" {
		args = append(args, "--versioning-dir", s.VersionsDir)
	}
	s.cmd = exec.Command(s.bin, append(args, s.Dir)...)
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, io.Discard
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.addr
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not listening on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Signal sends sig to the running gateway (SIGSTOP, SIGCONT: a paused S3).
func (s *S3) Signal(sig os.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return errors.New("versitygw is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Stop kills the gateway; it is a no-op when stopped.
func (s *S3) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// SetAWSEnv points the default AWS credential chain at the gateway's
// credentials (with the given secret) and away from any real AWS config.
func SetAWSEnv(t *testing.T, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", S3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

// CreateBucket creates a bucket through the S3 API.
func (s *S3) CreateBucket(t testing.TB, name string) {
	t.Helper()
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Config is lkscore's S3 config for a bucket on this gateway.
func (s *S3) Config(bucket string) config.S3 {
	c := config.Default().S3
	c.Bucket, c.Endpoint, c.ForcePathStyle, c.Region = bucket, s.Endpoint, true, "us-east-1"
	c.RequestTimeout, c.MaxAttempts = 5*time.Second, 2
	return c
}

// SyncBuffer is a goroutine-safe writer, for capturing logs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// JetStream connects to url and closes the connection at cleanup.
func JetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// FreeAddr is a loopback address with a port free at the moment of asking,
// for a process the test starts.
//
// The port is taken below the kernel's ephemeral range: a port the kernel
// handed out and the test closed can be taken again as the source port of
// any outgoing connection (a NATS route dialling its peers) before the
// server meant for it binds it ("address already in use": a 3-node cluster
// test lost a node to that).
//
// A port is handed out once per test binary: two addresses asked for one
// process (its listen and ops_listen) are never the same port, which a
// random pick that is only checked free could give (a CI run's ingest
// refused "ops_listen: must differ from listen").
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo := ephemeralLow()
	for range 200 {
		port := 10000 + rand.IntN(lo-10000)
		if !claimPort(port) {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			addr := ln.Addr().String()
			_ = ln.Close()
			return addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// handedOut are the ports FreeAddr gave in this test binary.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// claimPort reports whether port was not handed out before, and claims it.
func claimPort(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// ephemeralLow is the low end of the kernel's ephemeral port range (Linux's
// ip_local_port_range; 32768 where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if lo, err := strconv.Atoi(f[0]); err == nil && lo > 11000 {
			return lo
		}
	}
	return 32768
}

// PublishCards puts scorecards on the results stream as the scoring pool
// does (subject by close reason, the session key and agent headers, the
// msg id <key>@<scoring version>); a spread above 0 paces them over that
// long, so the dashboard's trends get more than one bucket.
func PublishCards(t testing.TB, js jetstream.JetStream, cards []session.Scorecard, spread time.Duration) {
	t.Helper()
	subj := wire.Default()
	for i, c := range cards {
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(subj.Result(c.Completion.CloseReason))
		msg.Data = data
		msg.Header.Set(wire.HeaderSessionKey, c.Session.Key)
		msg.Header.Set(wire.HeaderAgentName, c.Session.AgentName)
		if _, err := js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(c.Session.Key+"@"+c.ScoringVersion)); err != nil {
			t.Fatal(err)
		}
		if spread > 0 && i%10 == 9 {
			time.Sleep(spread / time.Duration(len(cards)/10+1))
		}
	}
}

// WaitFor polls cond every 10 ms until it holds, and fails the test when it
// does not within the given time.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// OpenBucket creates bucket on the gateway and opens it with open
// (store.NewS3): the S3 store a test runs against.
func OpenBucket[T any](t testing.TB, s *S3, bucket string, open func(context.Context, config.S3) (T, error)) T {
	t.Helper()
	s.CreateBucket(t, bucket)
	st, err := open(context.Background(), s.Config(bucket))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// WriteFile writes a test's file (a config, a fixture), readable by its
// owner only, or fails the test.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
