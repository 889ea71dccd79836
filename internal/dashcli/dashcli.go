// Package dashcli is the dashboard command, apart from the other command
// trees so that only cmd/dashboard links the dashboard and asynqmon.
package dashcli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashboard"
)

// Command is the dashboard command.
func Command(env cli.Env) *cobra.Command {
	var (
		addr         string
		readOnly     bool
		allowedHosts []string
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the web dashboard: workflows, providers, dead letters, asynqmon, JSON API, /metrics",
		Long: `dashboard serves pages for workflows, providers and dead letters, asynqmon
at /asynq/, a JSON API under /api/v1/ and Prometheus metrics at /metrics.

Changes (cancel, requeue, discard, submit, asynqmon's write actions) need
the token in AGENTQ_DASHBOARD_TOKEN: sign in on a page, or send it as
"Authorization: Bearer <token>"; with a token, reads need it too (only
/healthz, /readyz, /metrics and /api/v1/openapi.json are open).
--read-only refuses every change. Without a token the dashboard listens on
loopback only. Requests must name the dashboard in their Host header: the
listen address, localhost with its port, or --allowed-hosts.`,
		Example: `  AGENTQ_DASHBOARD_TOKEN=$(openssl rand -hex 16) dashboard --config agentq.yaml --addr :8080
  dashboard --read-only
  curl -H "Authorization: Bearer $AGENTQ_DASHBOARD_TOKEN" -X POST localhost:8080/api/v1/dlq/wf_abc:summary/requeue`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c := cli.AddCommon(cmd, &env, "redis.addr", "redis.url", "redis.username", "redis.password", "redis.db", "retention")
	cmd.Flags().StringVar(&addr, "addr", ":8080", "listen address")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "refuse every change")
	cmd.Flags().StringSliceVar(&allowedHosts, "allowed-hosts", nil, "more Host names the dashboard answers for, e.g. a proxy's or ingress's: name (any port) or name:port, comma-separated")
	var waitFor time.Duration
	cli.AddWaitForRedis(cmd, &waitFor)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := c.Load(cmd)
		if err != nil {
			return err
		}
		log, err := c.Logger(cmd)
		if err != nil {
			return err
		}
		token, _ := env.Lookup("AGENTQ_DASHBOARD_TOKEN")
		if token == "" {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return cli.UsageErr("--addr %q: %v", addr, err)
			}
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "dashboard: AGENTQ_DASHBOARD_TOKEN is not set: listening on %s (loopback) only, changes allowed from there\n", addr)
		}
		// Redis and asynqmon's connection options; the server builds its
		// producer client and readers with the same builder (app.Monitor)
		built, err := app.Build(cmd.Context(), cfg, app.Options{Logger: log, Secrets: []string{token}, WaitForRedis: waitFor}, app.AsynqMon())
		if err != nil {
			return err
		}
		defer built.Close()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return cli.UsageErr("--addr %s: %v", addr, err)
		}
		defer ln.Close()
		host, _, _ := net.SplitHostPort(addr)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		srv, err := dashboard.New(cmd.Context(), dashboard.Options{Config: cfg, Redis: built.Redis, Token: token, ReadOnly: readOnly, Logger: built.Logger, AsynqOpt: built.AsynqOpt,
			Addr: net.JoinHostPort(host, port), AllowedHosts: allowedHosts})
		if err != nil {
			return cli.UsageErr("%v", err)
		}
		defer srv.Close()
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
		hs.RegisterOnShutdown(srv.StopStreams) // event streams last as long as their workflows: a shutdown ends them
		fmt.Fprintf(cmd.OutOrStdout(), "dashboard on http://%s (read-only: %v)\n", ln.Addr(), readOnly)
		errc := make(chan error, 1)
		go func() { errc <- hs.Serve(ln) }()
		select {
		case err := <-errc:
			if !errors.Is(err, http.ErrServerClosed) {
				return err
			}
		case <-cmd.Context().Done():
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	}
	return cmd
}
