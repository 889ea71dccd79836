package cli_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

// startChaos serves a healthy chaosllm until the test ends.
func startChaos(t *testing.T) string {
	t.Helper()
	srv, err := chaosllm.New(chaosllm.Scenario{}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.ServeChaos(t, srv)
}

// startWorker runs the worker command until the test ends.
func startWorker(t *testing.T, vars map[string]string, args ...string) *testenv.Buffer {
	t.Helper()
	var out, errOut testenv.Buffer
	env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cmd := cli.Worker(env)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v\n%s", err, errOut.String())
		}
	})
	return &errOut
}

// A workflow runs end to end against a Redis that wants a password, given
// in a redis:// URL; a wrong password is exit 3 with a line that does not
// print it.
func TestRedisWithAPassword(t *testing.T) {
	const pass = "s3cret-redis-pass"
	srv := redistest.NewServer(t, "--requirepass", pass, "--save", "", "--appendonly", "no")
	srv.Start()
	cfg := writeFile(t, "agentq.yaml", testenv.ConfigYAML)
	vars := map[string]string{"CHAOS": startChaos(t), "K1": testenv.Keys[0], "K2": testenv.Keys[1],
		"AGENTQ_REDIS_URL": "redis://:" + pass + "@" + srv.Addr() + "/0"}
	logs := startWorker(t, vars, "--config", cfg)
	spec := writeFile(t, "hello.yaml", hello)
	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Ada", "--wait", "--wait-timeout", "30s", "--no-check") // the worker may not have started yet
	if r.code != 0 || !strings.Contains(r.out, "): completed") {
		t.Fatalf("enqueue --wait: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	wrong := merge(vars, map[string]string{"AGENTQ_REDIS_URL": "redis://:wrong-pass@" + srv.Addr() + "/0"})
	r = run(t, cli.Enqueue, wrong, "status", "wf_x", "--config", cfg)
	if r.code != 3 || strings.Contains(r.err, "wrong-pass") || !strings.Contains(r.err, "cannot reach Redis") {
		t.Fatalf("wrong password: exit %d, stderr %q", r.code, r.err)
	}
	if strings.Contains(logs.String(), pass) || strings.Contains(r.err, pass) {
		t.Fatal("the Redis password was printed")
	}
}

// The same over TLS: rediss:// with the test's own CA in redis.tls.ca_file.
func TestRedisOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeTestPKI(t, dir)
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no", "--port", "0", "--tls-port", "PORT",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	srv.SetArg("PORT", strconv.Itoa(srv.Port))
	srv.Start()
	cfg := writeFile(t, "agentq.yaml", testenv.ConfigYAML+"\nredis:\n  tls: { ca_file: "+strconv.Quote(ca)+" }\n")
	vars := map[string]string{"CHAOS": startChaos(t), "K1": testenv.Keys[0], "K2": testenv.Keys[1],
		"AGENTQ_REDIS_URL": "rediss://" + srv.Addr() + "/0"}
	startWorker(t, vars, "--config", cfg)
	spec := writeFile(t, "hello.yaml", hello)
	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Alan", "--wait", "--wait-timeout", "30s", "--no-check") // the worker may not have started yet
	if r.code != 0 || !strings.Contains(r.out, "): completed") {
		t.Fatalf("enqueue --wait over TLS: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	// without the CA the server's certificate is not trusted
	plain := writeFile(t, "plain.yaml", testenv.ConfigYAML)
	r = run(t, cli.Enqueue, vars, "status", "wf_x", "--config", plain)
	if r.code != 3 || !strings.Contains(r.err, "certificate") {
		t.Fatalf("untrusted certificate: exit %d, stderr %q", r.code, r.err)
	}
	// a missing CA file is a configuration error naming the field
	bad := writeFile(t, "bad.yaml", testenv.ConfigYAML+"\nredis:\n  tls: { ca_file: /nonexistent/ca.pem }\n")
	r = run(t, cli.Enqueue, vars, "status", "wf_x", "--config", bad)
	if r.code != 2 || !strings.Contains(r.err, "redis.tls: ca_file") {
		t.Fatalf("missing CA file: exit %d, stderr %q", r.code, r.err)
	}
}

// writeTestPKI writes a CA and a server certificate for 127.0.0.1 (PEM).
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}
