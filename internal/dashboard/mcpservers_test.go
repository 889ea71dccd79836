package dashboard_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// The providers page shows each configured MCP server with its transport
// and its breaker as the workers share it (open, until when), and never
// its command, URL or headers.
func TestTheProvidersPageShowsTheMCPServersBreakers(t *testing.T) {
	const header = "Bearer mcp-header-secret-5c1e"
	e := testenv.Start(t, testenv.Options{NoWorker: true, Configure: func(c *config.Config) {
		c.MCPServers = map[string]config.MCPServer{
			"files":  {Command: []string{"/opt/mcp/files-server", "--root", "/srv/private"}},
			"search": {URL: "https://search.internal.example/mcp?token=url-secret-77", Headers: map[string]config.Secret{"Authorization": header}},
		}
	}})
	// a worker failed to reach search: its breaker opened, fleet-wide
	w := router.NewBreakers(store.NewBreakers(e.Redis), breaker.Config{ConsecutiveFailures: 1, ErrorRate: 1, MinCalls: 100,
		Window: 10 * time.Second, Cooldown: time.Minute, ProbeTimeout: time.Minute}, nil, nil, nil)
	w.Record(t.Context(), config.MCPBreaker("search"), "", retry.Network, false)

	d := serveDash(t, e, dashboard.Options{Token: token})
	_, body := do(t, "GET", d.URL+"/providers", token)
	rows := regexp.MustCompile(`(?s)<h2>MCP servers</h2>.*?</table>`).FindString(body)
	want := []*regexp.Regexp{
		regexp.MustCompile(`<td>files</td><td>stdio</td><td class="br closed">closed</td>`),
		regexp.MustCompile(`<td>search</td><td>http</td><td class="br open">open until 20\d\d-\d\d-\d\dT`),
	}
	for _, re := range want {
		if !re.MatchString(rows) {
			t.Errorf("the MCP servers table lacks %s:\n%s", re, rows)
		}
	}
	for _, secret := range []string{"files-server", "/srv/private", "search.internal.example", "url-secret-77", "mcp-header-secret"} {
		if strings.Contains(body, secret) {
			t.Errorf("the providers page shows %q", secret)
		}
	}
}
