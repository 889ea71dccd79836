package dashboard_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/dashboard"
)

// The OpenAPI document served at /api/v1/openapi.json lists exactly the
// API's routes (read from api.go's registrations), and each documented
// route is served: the mux answers it (never 404 for an unknown path or
// 405 for a method it does not have).
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	e, _ := pending(t)
	d := serveDash(t, e, dashboard.Options{Token: token})
	r := d.do(t, call{Path: "/api/v1/openapi.json"})
	if r.Code != 200 {
		t.Fatalf("GET /api/v1/openapi.json: %d", r.Code)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(r.Body), &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("not an OpenAPI 3.1 document (%v): %.200s", err, r.Body)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	var src []byte
	for _, f := range []string{"api.go", "webhooks.go"} { // the files that register /api/v1 routes
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	routes := map[string]bool{"GET /api/v1/openapi.json": true}
	for _, m := range regexp.MustCompile(`HandleFunc\("([A-Z]+ /api/v1/[^"]*)"`).FindAllStringSubmatch(string(src), -1) {
		routes[m[1]] = true
	}
	if len(routes) < 10 {
		t.Fatalf("found only %d routes in api.go", len(routes))
	}
	for r := range routes {
		if !documented[r] {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for r := range documented {
		if !routes[r] {
			t.Errorf("openapi.json documents %s, which api.go does not serve", r)
		}
	}
	var names []string
	for r := range documented {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		method, path, _ := strings.Cut(r, " ")
		path = strings.NewReplacer("{id}", "wf_nope", "{task}", "wf_nope:s", "{action}", "requeue").Replace(path)
		res := d.do(t, call{Method: method, Path: path, Bearer: token})
		if res.Code == 404 && !strings.Contains(res.Body, "error") || res.Code == 405 {
			t.Errorf("%s %s: %d %.100s (the mux does not serve it)", method, path, res.Code, res.Body)
		}
	}
}
